"""Karpenter: the core with its KWOK cloud provider (package `sigs.k8s.io/karpenter/kwok`), from a
pinned release, with the CRDs of the same release (NodePool, NodeClaim, NodeOverlay from
`kwok/charts/crds`, KWOKNodeClass from `kwok/apis/crds`).

Built from its own wrapper module, tools/go/karpenter: the release's go.mod has no `replace`
line, so the wrapper only requires it. It is not a line in tools/go/operators because that
would change the operators' recipe (their cache key) and rebuild all four of them, and the
release requires newer golang.org/x modules than the operators' pins, so version selection
would move their dependencies too.
"""

from __future__ import annotations

from pathlib import Path

from tools.bootstrap.go import go_env, go_recipe, go_version, required_version
from tools.bootstrap.pulumi import module_dir
from tools.bootstrap.tool import GO_DIR, Tool, run

KARPENTER_DIR = GO_DIR / "karpenter"
KARPENTER_MODULE = "sigs.k8s.io/karpenter"
KARPENTER_BINARY = "karpenter-kwok"
KARPENTER_CRDS = "karpenter-crds.yaml"
# The CRD folders in the release: the core's (as the kwok chart ships them) and the KWOK
# provider's node class.
CRD_FOLDERS = ("kwok/charts/crds", "kwok/apis/crds")


def build_karpenter(tool: Tool, out: Path) -> None:
    env = go_env()
    # As the upstream image (ko): a static binary, with the release stamped where the
    # operator reports it.
    env["CGO_ENABLED"] = "0"
    run(
        tool,
        [
            "go",
            "build",
            "-trimpath",
            "-ldflags",
            f"-s -w -X {KARPENTER_MODULE}/pkg/operator.Version={tool.version}",
            "-o",
            str(out / KARPENTER_BINARY),
            f"{KARPENTER_MODULE}/kwok",
        ],
        cwd=KARPENTER_DIR,
        env={**env, "GOFLAGS": (env.get("GOFLAGS", "") + " -mod=readonly").strip()},
    )
    release = module_dir(tool, KARPENTER_DIR, KARPENTER_MODULE, tool.version, env=env)
    documents = [
        path.read_text().strip()
        for folder in CRD_FOLDERS
        for path in sorted((release / folder).glob("*.yaml"))
    ]
    documents = [d for d in documents if "kind: CustomResourceDefinition" in d]
    (out / KARPENTER_CRDS).write_text("---\n" + "\n---\n".join(documents) + "\n")


def karpenter_tool() -> Tool:
    return Tool(
        name="karpenter",
        version=required_version(KARPENTER_DIR, KARPENTER_MODULE),
        binaries=(KARPENTER_BINARY, KARPENTER_CRDS),
        obtain=build_karpenter,
        recipe=go_recipe(KARPENTER_DIR),
        extra_key=go_version() + repr(CRD_FOLDERS),
    )
