"""Tools built with the Go toolchain from the wrapper modules under tools/go/ (their go.mod and
go.sum pin versions and checksums): the environment of a build, the version a wrapper requires,
the recipe files, and the builds of OPA, etcd, KWOK (with its stages) and Kubernetes."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from tools.bootstrap.tool import GO_DIR, BootstrapError, Tool, run


def go_env() -> dict[str, str]:
    if shutil.which("go") is None:
        raise BootstrapError("the Go toolchain is needed to build the pinned tools: `go` not found")
    env = dict(os.environ)
    # A newer `go` line in an upstream module must fail loudly, not fetch a toolchain.
    env["GOTOOLCHAIN"] = "local"
    return env


def go_version() -> str:
    try:
        return subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        return "no-go"


def required_version(module_dir: Path, module: str) -> str:
    text = (module_dir / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if not match:
        raise BootstrapError(f"{module_dir}/go.mod does not require {module}")
    return match.group(1)


def go_recipe(module_dir: Path) -> tuple[Path, ...]:
    return tuple(sorted(p for p in module_dir.iterdir() if p.suffix in {".mod", ".sum", ".go"}))


def static_build(
    tool: Tool, out: Path, *, module_dir: Path, package: str, binary: str, ldflags: str
) -> dict[str, str]:
    """Build `package` of the wrapper module `module_dir` into `out/binary` as the upstream
    images are built (static: no cgo), from the wrapper's go.sum only (`-mod=readonly`: a
    missing checksum fails, nothing is added). The environment of the build, for the steps
    that follow it (the release's files from the module cache)."""
    env = go_env()
    env["CGO_ENABLED"] = "0"
    run(
        tool,
        ["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(out / binary), package],
        cwd=module_dir,
        env={**env, "GOFLAGS": (env.get("GOFLAGS", "") + " -mod=readonly").strip()},
    )
    return env


def crd_documents(folders: list[Path]) -> str:
    """The CustomResourceDefinitions of a release's folders (their *.yaml files in name order,
    kustomization files left out) as one multi-document YAML file."""
    documents = [p.read_text().strip() for folder in folders for p in sorted(folder.glob("*.yaml"))]
    documents = [d for d in documents if "kind: CustomResourceDefinition" in d]
    return "---\n" + "\n---\n".join(documents) + "\n"


# Version strings stamped into the Kubernetes binaries: without them they report
# v0.0.0-master+$Format:%H$, which breaks clients that parse the server version.
def _kube_ldflags(version: str) -> str:
    major, minor = version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w"]
    for package in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        flags += [
            f"-X {package}.gitVersion={version}",
            f"-X {package}.gitMajor={major}",
            f"-X {package}.gitMinor={minor}",
            f"-X {package}.gitTreeState=clean",
            f"-X {package}.gitCommit=0000000000000000000000000000000000000000",
            f"-X {package}.buildDate=1970-01-01T00:00:00Z",
        ]
    return " ".join(flags)


def build_kube(tool: Tool, out: Path) -> None:
    module_dir = GO_DIR / "kube"
    binary = out / "kube"
    run(
        tool,
        [
            "go",
            "build",
            "-trimpath",
            "-ldflags",
            _kube_ldflags(tool.version),
            "-o",
            str(binary),
            ".",
        ],
        cwd=module_dir,
        env=go_env(),
    )
    for name in tool.binaries:
        if name != "kube":
            (out / name).symlink_to("kube")


def go_tool_builder(module: str, package: str, binary: str) -> Callable[[Tool, Path], None]:
    def build(tool: Tool, out: Path) -> None:
        module_dir = GO_DIR / tool.name
        run(
            tool,
            ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / binary), package],
            cwd=module_dir,
            env=go_env(),
        )

    return build


# kwok ships no built-in stages since v0.8: take kwokctl's node and pod stages from the pinned
# module. pod-complete is left out on purpose: accelerator Jobs here model long-running training,
# so their pods stay Running until a test or the controller ends them.
KWOK_STAGES = (
    "kustomize/stage/node/fast/node-initialize.yaml",
    "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "kustomize/stage/pod/fast/pod-ready.yaml",
    "kustomize/stage/pod/fast/pod-delete.yaml",
)


def build_kwok(tool: Tool, out: Path) -> None:
    go_tool_builder("sigs.k8s.io/kwok", "sigs.k8s.io/kwok/cmd/kwok", "kwok")(tool, out)
    result = subprocess.run(
        ["go", "mod", "download", "-json", f"sigs.k8s.io/kwok@{tool.version}"],
        cwd=GO_DIR / "kwok",
        env=go_env(),
        capture_output=True,
        text=True,
    )
    match = re.search(r'"Dir":\s*"([^"]+)"', result.stdout)
    if result.returncode != 0 or not match:
        raise BootstrapError(f"could not obtain kwok stages: {result.stderr.strip()}")
    module_dir = Path(match.group(1))
    documents = [(module_dir / stage).read_text().strip() for stage in KWOK_STAGES]
    (out / "kwok-stages.yaml").write_text("\n---\n".join(documents) + "\n")
