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

from tools.bootstrap.go import (
    crd_documents,
    go_recipe,
    go_version,
    required_version,
    static_build,
)
from tools.bootstrap.pulumi import module_dir
from tools.bootstrap.tool import GO_DIR, Tool

KARPENTER_DIR = GO_DIR / "karpenter"
KARPENTER_MODULE = "sigs.k8s.io/karpenter"
KARPENTER_BINARY = "karpenter-kwok"
KARPENTER_CRDS = "karpenter-crds.yaml"
# The CRD folders in the release: the core's (as the kwok chart ships them) and the KWOK
# provider's node class.
CRD_FOLDERS = ("kwok/charts/crds", "kwok/apis/crds")


def build_karpenter(tool: Tool, out: Path) -> None:
    # As the upstream image (ko): a static binary, with the release stamped where the
    # operator reports it.
    env = static_build(
        tool,
        out,
        module_dir=KARPENTER_DIR,
        package=f"{KARPENTER_MODULE}/kwok",
        binary=KARPENTER_BINARY,
        ldflags=f"-s -w -X {KARPENTER_MODULE}/pkg/operator.Version={tool.version}",
    )
    release = module_dir(tool, KARPENTER_DIR, KARPENTER_MODULE, tool.version, env=env)
    (out / KARPENTER_CRDS).write_text(crd_documents([release / f for f in CRD_FOLDERS]))


def karpenter_tool() -> Tool:
    return Tool(
        name="karpenter",
        version=required_version(KARPENTER_DIR, KARPENTER_MODULE),
        binaries=(KARPENTER_BINARY, KARPENTER_CRDS),
        obtain=build_karpenter,
        recipe=go_recipe(KARPENTER_DIR),
        extra_key=go_version() + repr(CRD_FOLDERS),
    )
