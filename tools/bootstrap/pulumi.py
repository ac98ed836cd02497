"""The Pulumi CLI, its Python language plugin and shims, and the Kubernetes provider, built from
the Go module proxy; and `module_dir`, a module's folder in the module cache."""

from __future__ import annotations

import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from tools.bootstrap.go import go_env, required_version
from tools.bootstrap.tool import GO_DIR, BootstrapError, Tool, run

# --- Pulumi -----------------------------------------------------------------------------------
#
# The CLI, the Python language plugin and the Kubernetes provider come from the Go module proxy.
# Their upstream go.mod files replace Pulumi's own modules with relative paths, so each wrapper
# module under tools/go/pulumi*/ requires them at published versions instead. The proxy and its
# checksum database do not know every Pulumi module version: the wrappers pin what the proxy
# serves, and their go.sum files carry the checksums.

PULUMI_DIR = GO_DIR / "pulumi"
PULUMI_LANGUAGE_PYTHON_DIR = GO_DIR / "pulumi-language-python"
PULUMI_KUBERNETES_DIR = GO_DIR / "pulumi-resource-kubernetes"
PULUMI_SDK = "github.com/pulumi/pulumi/sdk/v3"
PULUMI_KUBERNETES_PROVIDER = "github.com/pulumi/pulumi-kubernetes/provider/v4"
PULUMI_KUBERNETES_SDK = "github.com/pulumi/pulumi-kubernetes/sdk/v4"

# Shims that Pulumi ships inside the sdk/v3 module and installs beside `pulumi`: the program
# runner the language plugin starts, and the provider of Python dynamic resources.
PULUMI_PYTHON_SHIMS = {
    "pulumi-language-python-exec": "python/cmd/pulumi-language-python-exec",
    "pulumi-resource-pulumi-python": "python/dist/pulumi-resource-pulumi-python",
}


def _pulumi_env() -> dict[str, str]:
    env = go_env()
    # Pulumi's release builds: no cgo, and the user lookup and gRPC tracing left out.
    env["CGO_ENABLED"] = "0"
    # Checksums of Pulumi modules come from the wrappers' go.sum (the checksum database here
    # lacks some of the versions the proxy serves).
    env["GONOSUMDB"] = "github.com/pulumi"
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()
    return env


def module_dir(
    tool: Tool,
    module_dir: Path,
    module: str,
    version: str,
    *,
    env: dict[str, str] | None = None,
    expected_sum: str = "",
) -> Path:
    """The module's folder in the module cache, downloaded if need be. expected_sum pins the
    checksum of a module that no go.sum covers (one the wrapper replaces by a folder)."""
    result = subprocess.run(
        ["go", "mod", "download", "-json", f"{module}@{version}"],
        cwd=module_dir,
        env=env or _pulumi_env(),
        capture_output=True,
        text=True,
    )
    match = re.search(r'"Dir":\s*"([^"]+)"', result.stdout)
    if result.returncode != 0 or not match:
        raise BootstrapError(
            f"could not obtain {tool.name} {tool.version}: {module}@{version}: "
            f"{(result.stderr or result.stdout).strip()}"
        )
    checksum = re.search(r'"Sum":\s*"([^"]+)"', result.stdout)
    if expected_sum and (not checksum or checksum.group(1) != expected_sum):
        raise BootstrapError(
            f"could not obtain {tool.name} {tool.version}: {module}@{version} has checksum "
            f"{checksum.group(1) if checksum else 'unknown'}, expected {expected_sum}"
        )
    return Path(match.group(1))


def _timed(tool: Tool, piece: str, build: Callable[[], None]) -> None:
    started = time.monotonic()
    build()
    print(
        f"[bootstrap] {tool.name} {tool.version}: built {piece} in {time.monotonic() - started:.0f}s",
        flush=True,
    )


def build_pulumi(tool: Tool, out: Path) -> None:
    """The `pulumi` CLI, the Python language plugin and Pulumi's Python shims, in one directory:
    the CLI looks for its bundled plugins next to its own (symlink-resolved) executable."""
    env = _pulumi_env()
    ldflags = f"-s -w -X {PULUMI_SDK}/go/common/version.Version={tool.version}"
    common = ["go", "build", "-trimpath", "-tags", "osusergo,grpcnotrace", "-ldflags", ldflags]
    _timed(
        tool,
        "pulumi",
        lambda: run(
            tool,
            [*common, "-o", str(out / "pulumi"), "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"],
            cwd=PULUMI_DIR,
            env=env,
        ),
    )
    _timed(
        tool,
        "pulumi-language-python",
        lambda: run(
            tool,
            [*common, "-o", str(out / "pulumi-language-python"), "."],
            cwd=PULUMI_LANGUAGE_PYTHON_DIR,
            env=env,
        ),
    )
    sdk = module_dir(
        tool,
        PULUMI_LANGUAGE_PYTHON_DIR,
        PULUMI_SDK,
        required_version(PULUMI_LANGUAGE_PYTHON_DIR, PULUMI_SDK),
    )
    for name, relative in PULUMI_PYTHON_SHIMS.items():
        # Module cache files are read-only and carry no execute bit.
        target = out / name
        shutil.copyfile(sdk / relative, target)
        target.chmod(0o755)


def build_pulumi_kubernetes(tool: Tool, out: Path) -> None:
    """pulumi-resource-kubernetes. Its main embeds schema-embed.json and
    terraform-mapping-embed.json, which upstream generates (cmd/.../generate.go) and which the
    module zip therefore lacks: the main package is copied into a scratch copy of the wrapper
    module, upstream's generate.go writes the two files there, and that copy is built."""
    env = _pulumi_env()
    provider = module_dir(
        tool,
        PULUMI_KUBERNETES_DIR,
        PULUMI_KUBERNETES_PROVIDER,
        required_version(PULUMI_KUBERNETES_DIR, PULUMI_KUBERNETES_PROVIDER),
    )
    with tempfile.TemporaryDirectory(prefix="pulumi-kubernetes-") as scratch:
        work = Path(scratch)
        for name in ("go.mod", "go.sum"):
            shutil.copyfile(PULUMI_KUBERNETES_DIR / name, work / name)
        main_dir = work / "cmd" / "pulumi-resource-kubernetes"
        main_dir.mkdir(parents=True)
        upstream = provider / "cmd" / "pulumi-resource-kubernetes"
        for name in ("main.go", "generate.go", "schema.json", "terraform-mapping.json"):
            shutil.copyfile(upstream / name, main_dir / name)
        _timed(
            tool,
            "schema-embed.json",
            lambda: run(
                tool,
                ["go", "run", "generate.go"],
                cwd=main_dir,
                env={**env, "VERSION": tool.version.lstrip("v")},
            ),
        )
        ldflags = f"-s -w -X {PULUMI_KUBERNETES_PROVIDER}/pkg/version.Version={tool.version}"
        _timed(
            tool,
            "pulumi-resource-kubernetes",
            lambda: run(
                tool,
                [
                    "go",
                    "build",
                    "-trimpath",
                    "-ldflags",
                    ldflags,
                    "-o",
                    str(out / "pulumi-resource-kubernetes"),
                    "./cmd/pulumi-resource-kubernetes",
                ],
                cwd=work,
                env=env,
            ),
        )
