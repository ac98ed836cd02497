"""Generate the Python protobuf modules the controller lists pods and nodes with.

The controller asks kube-apiserver for pods and nodes as Kubernetes protobuf (see
`controller/observe/kube.py`), decoded by modules generated from the `.proto` files of the
k8s.io/api and k8s.io/apimachinery Go modules, at the versions `tools/go/kube/go.mod` pins (the
release the local control plane is built from). The sources come from the Go module cache
(`go mod download` fetches them when missing); protoc is grpcio-tools' (pinned in the dev extra).

    python -m tools.k8sproto              # regenerate controller/observe/k8s_pb/*_pb2.py
    python -m tools.k8sproto --out DIR    # write them somewhere else (the reproducibility test)

protoc names a module after its .proto path (`k8s.io/api/core/v1/generated.proto` becomes
`k8s.io.api.core.v1.generated_pb2`, which is no importable package), so each module is written
flat into the package under a short name (`core_v1_pb2`, ...) and its imports of the others are
rewritten to package-relative ones; the descriptors keep their upstream file names.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GO_MOD = ROOT / "tools" / "go" / "kube" / "go.mod"
PACKAGE_DIR = ROOT / "controller" / "observe" / "k8s_pb"

# .proto path (as imported upstream) -> module name in the package.
PROTOS = {
    "k8s.io/api/core/v1/generated.proto": "core_v1_pb2",
    "k8s.io/apimachinery/pkg/api/resource/generated.proto": "resource_pb2",
    "k8s.io/apimachinery/pkg/apis/meta/v1/generated.proto": "meta_v1_pb2",
    "k8s.io/apimachinery/pkg/runtime/generated.proto": "runtime_pb2",
    "k8s.io/apimachinery/pkg/runtime/schema/generated.proto": "runtime_schema_pb2",
    "k8s.io/apimachinery/pkg/util/intstr/generated.proto": "intstr_pb2",
}
MODULES = ("k8s.io/api", "k8s.io/apimachinery")


class ProtoError(RuntimeError):
    """The sources or protoc are missing, or protoc failed; the message says which."""


def pinned_version(module: str, go_mod: Path = GO_MOD) -> str:
    """The version go.mod resolves `module` to: its replace directive if any, else its
    require line."""
    text = go_mod.read_text()
    name = re.escape(module)
    replaced = re.search(rf"^\s*{name}\s+=>\s+{name}\s+(v\S+)", text, re.MULTILINE)
    required = re.search(rf"^\s*(?:require\s+)?{name}\s+(v\S+)", text, re.MULTILINE)
    found = replaced or required
    if not found:
        raise ProtoError(f"{go_mod} does not pin {module}")
    return found.group(1)


def _go(*args: str) -> str:
    if shutil.which("go") is None:
        raise ProtoError("the Go toolchain is needed to locate k8s.io/api's .proto files")
    env = {**os.environ, "GOTOOLCHAIN": "local"}
    result = subprocess.run(["go", *args], capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise ProtoError(f"`go {' '.join(args)}` exited {result.returncode}: {result.stderr}")
    return result.stdout


def module_dir(module: str, version: str, *, download: bool = True) -> Path:
    """The module's source directory in the Go module cache (downloaded when missing)."""
    cache = Path(_go("env", "GOMODCACHE").strip())
    found = cache / f"{module}@{version}"
    if not found.is_dir() and download:
        info = json.loads(_go("mod", "download", "-json", f"{module}@{version}"))
        found = Path(info["Dir"])
    if not found.is_dir():
        raise ProtoError(f"{module}@{version} is not in the Go module cache ({cache})")
    return found


def sources(*, download: bool = True) -> dict[str, Path]:
    """`k8s.io/api` -> its directory in the module cache, for each module the protos come
    from."""
    return {m: module_dir(m, pinned_version(m), download=download) for m in MODULES}


def _relative_imports(text: str) -> str:
    """protoc's `from k8s.io.x.y import generated_pb2 as alias` -> `from . import <module> as
    alias`; the module's own name -> `__name__` (its message classes' `__module__`)."""
    by_package = {proto.rsplit("/", 1)[0].replace("/", "."): mod for proto, mod in PROTOS.items()}

    def imported(match: re.Match[str]) -> str:
        package = match.group(1)
        if package not in by_package:
            raise ProtoError(f"generated code imports {package}, which is not generated")
        return f"from . import {by_package[package]} as {match.group(2)}"

    text = re.sub(
        r"^from (k8s\.io\.\S+) import generated_pb2 as (\w+)$", imported, text, flags=re.M
    )
    return re.sub(
        r"(_builder\.BuildTopDescriptorsAndMessages\(DESCRIPTOR, )'[^']+'", r"\1__name__", text
    )


def generate(out: Path, *, download: bool = True) -> list[Path]:
    """Write the package's modules into `out`; the paths written."""
    roots = sources(download=download)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="k8sproto-") as scratch:
        # protoc maps the import paths onto the module cache: -I k8s.io/api=<dir>.
        includes = [f"-I{module}={path}" for module, path in roots.items()]
        command = [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            *includes,
            f"--python_out={scratch}",
            *PROTOS,
        ]
        result = subprocess.run(command, capture_output=True, text=True)
        if result.returncode != 0:
            raise ProtoError(f"protoc exited {result.returncode}: {result.stderr}{result.stdout}")
        written = []
        for proto, module in PROTOS.items():
            generated = Path(scratch) / (proto.removesuffix(".proto").replace(".", "/") + "_pb2.py")
            target = out / f"{module}.py"
            target.write_text(_relative_imports(generated.read_text()))
            written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=PACKAGE_DIR)
    args = parser.parse_args(argv)
    try:
        for path in generate(args.out):
            print(path)
    except ProtoError as error:
        print(f"k8sproto: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
