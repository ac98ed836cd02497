"""Obtain the pinned upstream tools the project runs against, into tools/bin.

Every tool comes from a package registry this machine reaches: Go tools are built from the Go
module proxy through the wrapper modules under tools/go/ (their go.mod/go.sum pin versions and
checksums); Prometheus and its companions, containerd, runc, the CNI plugins, iptables, the registry and
catatonit come from Debian's archive (unpacked, not installed). Built binaries live in a per-user
cache keyed by tool, version and a hash of the recipe, so a fresh clone (or CI) on the same
machine reuses them in seconds; tools/bin (git-ignored) only holds symlinks into that cache.

    python -m tools.bootstrap            # obtain everything missing, print a line per tool
    python -m tools.bootstrap --list     # show what is pinned and whether it is cached
    python -m tools.bootstrap opa kwok   # only these tools
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GO_DIR = ROOT / "tools" / "go"
BIN_DIR = ROOT / "tools" / "bin"


def cache_root() -> Path:
    explicit = os.environ.get("FLEETPLANE_TOOLS_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "fleetplane" / "tools"


class BootstrapError(RuntimeError):
    """A tool could not be obtained; the message names the tool and the cause."""


@dataclass(frozen=True, kw_only=True)
class Tool:
    """One upstream tool: how to obtain it and which binaries it provides."""

    name: str
    version: str
    binaries: tuple[str, ...]
    obtain: Callable[[Tool, Path], None]
    recipe: tuple[Path, ...] = field(default=())
    extra_key: str = ""

    def cache_dir(self) -> Path:
        digest = hashlib.sha256(self.extra_key.encode())
        for path in self.recipe:
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
        return cache_root() / f"{self.name}-{self.version}-{digest.hexdigest()[:12]}"

    def is_cached(self) -> bool:
        directory = self.cache_dir()
        return all((directory / binary).is_file() for binary in self.binaries)


def _run(tool: Tool, cmd: list[str], *, cwd: Path, env: dict[str, str] | None = None) -> None:
    with tempfile.TemporaryFile(mode="w+") as log:
        result = subprocess.run(cmd, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT)
        if result.returncode != 0:
            log.seek(0)
            tail = "".join(log.readlines()[-25:])
            raise BootstrapError(
                f"could not obtain {tool.name} {tool.version}: `{' '.join(cmd)}` exited "
                f"{result.returncode}\n{tail}"
            )


def _go_env() -> dict[str, str]:
    if shutil.which("go") is None:
        raise BootstrapError("the Go toolchain is needed to build the pinned tools: `go` not found")
    env = dict(os.environ)
    # A newer `go` line in an upstream module must fail loudly, not fetch a toolchain.
    env["GOTOOLCHAIN"] = "local"
    return env


def _go_version() -> str:
    try:
        return subprocess.run(["go", "env", "GOVERSION"], capture_output=True, text=True).stdout
    except FileNotFoundError:
        return "no-go"


def _required_version(module_dir: Path, module: str) -> str:
    text = (module_dir / "go.mod").read_text()
    match = re.search(rf"^\s*(?:require\s+)?{re.escape(module)}\s+(v\S+)", text, re.MULTILINE)
    if not match:
        raise BootstrapError(f"{module_dir}/go.mod does not require {module}")
    return match.group(1)


def _go_recipe(module_dir: Path) -> tuple[Path, ...]:
    return tuple(sorted(p for p in module_dir.iterdir() if p.suffix in {".mod", ".sum", ".go"}))


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


def _build_kube(tool: Tool, out: Path) -> None:
    module_dir = GO_DIR / "kube"
    binary = out / "kube"
    _run(
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
        env=_go_env(),
    )
    for name in tool.binaries:
        if name != "kube":
            (out / name).symlink_to("kube")


def _go_tool_builder(module: str, package: str, binary: str) -> Callable[[Tool, Path], None]:
    def build(tool: Tool, out: Path) -> None:
        module_dir = GO_DIR / tool.name
        _run(
            tool,
            ["go", "build", "-trimpath", "-ldflags", "-s -w", "-o", str(out / binary), package],
            cwd=module_dir,
            env=_go_env(),
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


def _build_kwok(tool: Tool, out: Path) -> None:
    _go_tool_builder("sigs.k8s.io/kwok", "sigs.k8s.io/kwok/cmd/kwok", "kwok")(tool, out)
    result = subprocess.run(
        ["go", "mod", "download", "-json", f"sigs.k8s.io/kwok@{tool.version}"],
        cwd=GO_DIR / "kwok",
        env=_go_env(),
        capture_output=True,
        text=True,
    )
    match = re.search(r'"Dir":\s*"([^"]+)"', result.stdout)
    if result.returncode != 0 or not match:
        raise BootstrapError(f"could not obtain kwok stages: {result.stderr.strip()}")
    module_dir = Path(match.group(1))
    documents = [(module_dir / stage).read_text().strip() for stage in KWOK_STAGES]
    (out / "kwok-stages.yaml").write_text("\n---\n".join(documents) + "\n")


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
    env = _go_env()
    # Pulumi's release builds: no cgo, and the user lookup and gRPC tracing left out.
    env["CGO_ENABLED"] = "0"
    # Checksums of Pulumi modules come from the wrappers' go.sum (the checksum database here
    # lacks some of the versions the proxy serves).
    env["GONOSUMDB"] = "github.com/pulumi"
    env["GOFLAGS"] = (env.get("GOFLAGS", "") + " -mod=readonly").strip()
    return env


def _module_dir(
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


def _build_pulumi(tool: Tool, out: Path) -> None:
    """The `pulumi` CLI, the Python language plugin and Pulumi's Python shims, in one directory:
    the CLI looks for its bundled plugins next to its own (symlink-resolved) executable."""
    env = _pulumi_env()
    ldflags = f"-s -w -X {PULUMI_SDK}/go/common/version.Version={tool.version}"
    common = ["go", "build", "-trimpath", "-tags", "osusergo,grpcnotrace", "-ldflags", ldflags]
    _timed(
        tool,
        "pulumi",
        lambda: _run(
            tool,
            [*common, "-o", str(out / "pulumi"), "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"],
            cwd=PULUMI_DIR,
            env=env,
        ),
    )
    _timed(
        tool,
        "pulumi-language-python",
        lambda: _run(
            tool,
            [*common, "-o", str(out / "pulumi-language-python"), "."],
            cwd=PULUMI_LANGUAGE_PYTHON_DIR,
            env=env,
        ),
    )
    sdk = _module_dir(
        tool,
        PULUMI_LANGUAGE_PYTHON_DIR,
        PULUMI_SDK,
        _required_version(PULUMI_LANGUAGE_PYTHON_DIR, PULUMI_SDK),
    )
    for name, relative in PULUMI_PYTHON_SHIMS.items():
        # Module cache files are read-only and carry no execute bit.
        target = out / name
        shutil.copyfile(sdk / relative, target)
        target.chmod(0o755)


def _build_pulumi_kubernetes(tool: Tool, out: Path) -> None:
    """pulumi-resource-kubernetes. Its main embeds schema-embed.json and
    terraform-mapping-embed.json, which upstream generates (cmd/.../generate.go) and which the
    module zip therefore lacks: the main package is copied into a scratch copy of the wrapper
    module, upstream's generate.go writes the two files there, and that copy is built."""
    env = _pulumi_env()
    provider = _module_dir(
        tool,
        PULUMI_KUBERNETES_DIR,
        PULUMI_KUBERNETES_PROVIDER,
        _required_version(PULUMI_KUBERNETES_DIR, PULUMI_KUBERNETES_PROVIDER),
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
            lambda: _run(
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
            lambda: _run(
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


# --- Volcano ----------------------------------------------------------------------------------
#
# vc-scheduler, vc-controller-manager and vc-webhook-manager, one multi-call binary built from the
# wrapper module tools/go/volcano. Volcano v1.15.1 replaces volcano.sh/apis with a nested staging
# module that its module zip leaves out, and the proxy serves no volcano.sh/apis v1.15.x. Diffing
# that staging copy (git tag v1.15.1) against apis v1.14.0 shows one declaration the code needs
# (QueueAllocationGateKey); the rest is comments, kubebuilder markers, the fake clientset and a
# watch-list wrapper in the informers that changes nothing for a real clientset. So the build
# copies apis v1.14.0 into a scratch folder, adds the files under tools/go/volcano/_apis (a folder
# the go command ignores), and the wrapper's go.mod replaces volcano.sh/apis with it.

VOLCANO_DIR = GO_DIR / "volcano"
VOLCANO_MODULE = "volcano.sh/volcano"
# The apis release the scratch copy starts from, with its go.sum checksum (no go.sum covers a
# module replaced by a folder).
VOLCANO_APIS = ("volcano.sh/apis", "v1.14.0", "h1:Rf8wzGFmgzbyg85GO0CxapDDEk/VM3D7QbjbI/sH+OQ=")
VOLCANO_COMMANDS = ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager")
VOLCANO_CHART = "installer/helm/chart/volcano"
# Files taken from the release's Helm chart, so the product can use the pinned release's CRDs:
# the chart's CRDs, those of its jobflow subchart (JobFlow, JobTemplate; vc-controller-manager's
# jobflow controllers wait for them), and the scheduler configuration the chart deploys.
VOLCANO_FILES = {
    "volcano-crds.yaml": f"{VOLCANO_CHART}/crd/bases",
    "volcano-jobflow-crds.yaml": f"{VOLCANO_CHART}/charts/jobflow/crd/bases",
    "volcano-scheduler.conf": f"{VOLCANO_CHART}/config/volcano-scheduler.conf",
}


def _volcano_overlay() -> tuple[Path, ...]:
    return tuple(sorted(p for p in (VOLCANO_DIR / "_apis").rglob("*") if p.is_file()))


def _build_volcano(tool: Tool, out: Path) -> None:
    env = _go_env()
    # As upstream's Makefile: static binaries.
    env["CGO_ENABLED"] = "0"
    with tempfile.TemporaryDirectory(prefix="volcano-") as scratch:
        work = Path(scratch)
        # Downloads run before go.mod is copied in: outside a module, so that the missing
        # ./apis folder the wrapper's go.mod names does not get in the way.
        release = _module_dir(tool, work, VOLCANO_MODULE, tool.version, env=env)
        module, version, checksum = VOLCANO_APIS
        apis = _module_dir(tool, work, module, version, env=env, expected_sum=checksum)
        # The CRDs and scheduler configuration are taken from the chart: make sure it is the
        # release's own.
        chart = (release / VOLCANO_CHART / "Chart.yaml").read_text()
        chart_version = re.search(r'^version:\s*"?([^"\s]+)', chart, re.MULTILINE)
        if not chart_version or chart_version.group(1) != tool.version.lstrip("v"):
            raise BootstrapError(
                f"could not obtain {tool.name} {tool.version}: the module's Helm chart is "
                f"version {chart_version.group(1) if chart_version else 'unknown'}"
            )
        for name in ("go.mod", "go.sum", "main.go"):
            shutil.copyfile(VOLCANO_DIR / name, work / name)
        # Module cache files and folders are read-only: copy contents only, then add ours.
        shutil.copytree(apis, work / "apis", copy_function=shutil.copyfile)
        for folder, _, _ in os.walk(work / "apis"):
            Path(folder).chmod(0o755)
        for source in _volcano_overlay():
            target = work / "apis" / source.relative_to(VOLCANO_DIR / "_apis")
            if target.exists():
                raise BootstrapError(
                    f"could not obtain {tool.name} {tool.version}: {target.name} would replace "
                    f"a file of {module} {version}; the overlay only adds declarations"
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        ldflags = f"-s -w -X {VOLCANO_MODULE}/pkg/version.Version={tool.version}"
        _run(
            tool,
            ["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(out / "volcano"), "."],
            cwd=work,
            env={**env, "GOFLAGS": (env.get("GOFLAGS", "") + " -mod=readonly").strip()},
        )
    for name in VOLCANO_COMMANDS:
        (out / name).symlink_to("volcano")
    for name, relative in VOLCANO_FILES.items():
        source = release / relative
        if source.is_dir():
            documents = [p.read_text().strip() for p in sorted(source.glob("*.yaml"))]
            (out / name).write_text("---\n" + "\n---\n".join(documents) + "\n")
        else:
            shutil.copyfile(source, out / name)


# --- Debian packages ----------------------------------------------------------------------------
#
# Taken out of Debian's .deb files without installing them system-wide (nothing lands in /usr,
# no service starts). A package's tool version is its upstream version: any Debian revision of it
# (a security update, say) is accepted, another upstream version is refused.


def _debian_tool(*, name: str, package: str, version: str, files: dict[str, str]) -> Tool:
    """A tool made of files from Debian's `package`: files maps each name in tools/bin (a
    `cni/` prefix keeps the CNI plugins in a folder of their own) to its path in the .deb."""

    def obtain(tool: Tool, out: Path) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            root = _unpack_debian(tool, package, Path(tmp))
            for target, source in files.items():
                (out / target).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(root / source, out / target)
                _check_libraries(tool, out / target)

    # The package and the file map are the recipe: changing either gets a fresh cache folder.
    return Tool(
        name=name,
        version=version,
        binaries=tuple(files),
        obtain=obtain,
        extra_key=repr((package, sorted(files.items()))),
    )


IPTABLES_COMMANDS = (
    "iptables",
    "iptables-save",
    "iptables-restore",
    "ip6tables",
    "ip6tables-save",
    "ip6tables-restore",
)
IPTABLES_LIBRARIES = (
    "libxtables12",
    "libip4tc2",
    "libip6tc2",
    "libnftnl11",
    "libmnl0",
    "libnetfilter-conntrack3",
    "libnfnetlink0",
)
IPTABLES_WRAPPER = """#!/bin/sh
# {command} (nf_tables backend) from Debian's iptables package, with the libraries and
# extensions the package depends on unpacked beside it (tools/bootstrap.py, _iptables_tool).
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/lib" XTABLES_LIBDIR="$here/xtables" exec "$here/xtables-nft-multi" {command} "$@"
"""


def _iptables_tool(version: str) -> Tool:
    """iptables for kube-proxy (which runs `iptables`, `iptables-save`, `iptables-restore` and
    their IPv6 twins from PATH). Debian's package needs libraries this machine lacks, so they are
    unpacked too (their Debian packages, any version), into `iptables/lib`, and each command is a
    small wrapper that points the loader and iptables' extension directory there."""

    def obtain(tool: Tool, out: Path) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            root = _unpack_debian(tool, "iptables", Path(tmp), extra=IPTABLES_LIBRARIES)
            target = out / "iptables"
            (target / "lib").mkdir(parents=True)
            shutil.copy2(root / "usr/sbin/xtables-nft-multi", target / "xtables-nft-multi")
            libdir = root / "usr/lib/x86_64-linux-gnu"
            for library in sorted(libdir.glob("*.so*")):
                shutil.copy2(library, target / "lib" / library.name, follow_symlinks=False)
            shutil.copytree(libdir / "xtables", target / "xtables")
            for command in IPTABLES_COMMANDS:
                wrapper = target / command
                wrapper.write_text(IPTABLES_WRAPPER.format(command=command))
                wrapper.chmod(0o755)
            _check_libraries(tool, target / "xtables-nft-multi", library_path=target / "lib")

    return Tool(
        name="iptables",
        version=version,
        binaries=tuple(f"iptables/{command}" for command in IPTABLES_COMMANDS),
        obtain=obtain,
        extra_key=repr((IPTABLES_LIBRARIES, IPTABLES_WRAPPER)),
    )


def _unpack_debian(tool: Tool, package: str, work: Path, *, extra: tuple[str, ...] = ()) -> Path:
    """Download `package` at the pinned upstream version (and `extra` packages at Debian's
    candidate) and unpack them into `work/root`, which is returned."""
    if shutil.which("apt-get") is None or shutil.which("dpkg-deb") is None:
        raise BootstrapError(f"could not obtain {tool.name}: apt-get/dpkg-deb not found")
    candidate = _apt_candidate(package)
    if not _is_upstream_version(candidate, tool.version):
        _run(tool, ["apt-get", "update", "-qq"], cwd=work)
        candidate = _apt_candidate(package)
    if not _is_upstream_version(candidate, tool.version):
        raise BootstrapError(
            f"could not obtain {tool.name} {tool.version}: Debian offers {package} "
            f"{candidate or 'nothing'}"
        )
    wanted = [f"{package}={candidate}"]
    for name in extra:
        found = _apt_candidate(name)
        if not found:
            raise BootstrapError(f"could not obtain {tool.name}: Debian offers no {name}")
        wanted.append(f"{name}={found}")
    _run(tool, ["apt-get", "download", "-qq", *wanted], cwd=work)
    for deb in sorted(work.glob("*.deb")):
        _run(tool, ["dpkg-deb", "-x", str(deb), str(work / "root")], cwd=work)
    return work / "root"


def _is_upstream_version(candidate: str, version: str) -> bool:
    """Whether Debian's version string (epoch:upstream-revision, upstream possibly with
    +ds or ~ds repack suffixes) carries this upstream version."""
    upstream = candidate.split(":", 1)[-1]
    return upstream == version or (upstream.startswith(version) and upstream[len(version)] in "+~-")


def _apt_candidate(package: str) -> str:
    result = subprocess.run(["apt-cache", "policy", package], capture_output=True, text=True)
    match = re.search(r"Candidate:\s*(\S+)", result.stdout)
    return match.group(1) if match and match.group(1) != "(none)" else ""


def _check_libraries(tool: Tool, binary: Path, *, library_path: Path | None = None) -> None:
    # Installing the package would pull its library dependencies in; unpacking does not, so a
    # binary that needs a library this machine lacks is refused here rather than at first use.
    if shutil.which("ldd") is None:
        return
    env = None if library_path is None else {**os.environ, "LD_LIBRARY_PATH": str(library_path)}
    result = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, env=env)
    missing = [line.split()[0] for line in result.stdout.splitlines() if "not found" in line]
    if missing:
        raise BootstrapError(
            f"could not obtain {tool.name} {tool.version}: {binary.name} needs "
            f"{', '.join(missing)}, which this machine lacks"
        )


def pinned_tools() -> list[Tool]:
    go_key = _go_version()
    kube_dir = GO_DIR / "kube"
    return [
        Tool(
            name="opa",
            version=_required_version(GO_DIR / "opa", "github.com/open-policy-agent/opa"),
            binaries=("opa",),
            obtain=_go_tool_builder(
                "github.com/open-policy-agent/opa", "github.com/open-policy-agent/opa", "opa"
            ),
            recipe=_go_recipe(GO_DIR / "opa"),
            extra_key=go_key,
        ),
        Tool(
            name="etcd",
            version=_required_version(GO_DIR / "etcd", "go.etcd.io/etcd/server/v3"),
            binaries=("etcd",),
            obtain=_go_tool_builder(
                "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3", "etcd"
            ),
            recipe=_go_recipe(GO_DIR / "etcd"),
            extra_key=go_key,
        ),
        Tool(
            name="kwok",
            version=_required_version(GO_DIR / "kwok", "sigs.k8s.io/kwok"),
            binaries=("kwok", "kwok-stages.yaml"),
            obtain=_build_kwok,
            recipe=_go_recipe(GO_DIR / "kwok"),
            extra_key=go_key,
        ),
        Tool(
            name="kube",
            version=_required_version(kube_dir, "k8s.io/kubernetes"),
            binaries=(
                "kube",
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
                "kubelet",
                "kube-proxy",
                "kubectl",
            ),
            obtain=_build_kube,
            recipe=_go_recipe(kube_dir),
            extra_key=go_key,
        ),
        Tool(
            name="pulumi",
            version=_required_version(PULUMI_DIR, "github.com/pulumi/pulumi/pkg/v3"),
            binaries=(
                "pulumi",
                "pulumi-language-python",
                *PULUMI_PYTHON_SHIMS,
            ),
            obtain=_build_pulumi,
            recipe=_go_recipe(PULUMI_DIR) + _go_recipe(PULUMI_LANGUAGE_PYTHON_DIR),
            extra_key=go_key,
        ),
        Tool(
            # The provider is built from a commit of the pulumi-kubernetes repository and stamped
            # with the release of the Python SDK it matches (the Go SDK the wrapper requires).
            name="pulumi-resource-kubernetes",
            version=_required_version(PULUMI_KUBERNETES_DIR, PULUMI_KUBERNETES_SDK),
            binaries=("pulumi-resource-kubernetes",),
            obtain=_build_pulumi_kubernetes,
            recipe=_go_recipe(PULUMI_KUBERNETES_DIR),
            extra_key=go_key,
        ),
        Tool(
            name="volcano",
            version=_required_version(VOLCANO_DIR, VOLCANO_MODULE),
            binaries=("volcano", *VOLCANO_COMMANDS, *VOLCANO_FILES),
            obtain=_build_volcano,
            recipe=_go_recipe(VOLCANO_DIR) + _volcano_overlay(),
            extra_key=go_key + repr(VOLCANO_APIS),
        ),
        # Debian bookworm's versions as `apt-cache policy` offered them when pinned.
        _debian_tool(
            name="prometheus",
            package="prometheus",
            version="2.42.0",
            files={"prometheus": "usr/bin/prometheus", "promtool": "usr/bin/promtool"},
        ),
        _debian_tool(
            name="pushgateway",
            package="prometheus-pushgateway",
            version="1.5.1",
            files={"pushgateway": "usr/bin/prometheus-pushgateway"},
        ),
        _debian_tool(
            name="alertmanager",
            package="prometheus-alertmanager",
            version="0.25.0",
            # Debian's build reads its notification templates from /usr/share instead of
            # embedding them; the local fleet lays these copies over /usr/share for its process.
            files={
                "alertmanager": "usr/bin/prometheus-alertmanager",
                "amtool": "usr/bin/amtool",
                **{
                    f"share/prometheus/alertmanager/{name}": (
                        f"usr/share/prometheus/alertmanager/{name}"
                    )
                    for name in ("default.tmpl", "email.tmpl")
                },
            },
        ),
        # What a real container node needs: containerd (its CRI plugin is built in) with runc,
        # the CNI plugins a bridge network takes, a registry for pulls by digest, and catatonit
        # as the pause process. containerd finds its shim beside itself or on PATH, the shim
        # finds runc on PATH; point containerd's CNI bin_dir at tools/bin/cni.
        _debian_tool(
            name="containerd",
            package="containerd",
            version="1.6.20",
            files={
                "containerd": "usr/bin/containerd",
                "containerd-shim-runc-v2": "usr/bin/containerd-shim-runc-v2",
                "ctr": "usr/bin/ctr",
            },
        ),
        _debian_tool(
            name="runc",
            package="runc",
            version="1.1.5",
            files={"runc": "usr/sbin/runc"},
        ),
        _debian_tool(
            name="cni-plugins",
            package="containernetworking-plugins",
            version="1.1.1",
            files={
                f"cni/{plugin}": f"usr/lib/cni/{plugin}"
                for plugin in ("bridge", "host-local", "loopback", "portmap")
            },
        ),
        _debian_tool(
            name="registry",
            package="docker-registry",
            version="2.8.2",
            files={"registry": "usr/bin/docker-registry"},
        ),
        # kube-proxy's iptables mode (Debian's, the nf_tables backend; see _iptables_tool)
        _iptables_tool("1.8.9"),
        _debian_tool(
            name="catatonit",
            package="catatonit",
            version="0.1.7",
            files={"catatonit": "usr/bin/catatonit"},
        ),
    ]


def obtain(tool: Tool, *, log: Callable[[str], None]) -> Path:
    """Make the tool's binaries available in its cache dir and link them into tools/bin."""
    directory = tool.cache_dir()
    if tool.is_cached():
        log(f"{tool.name} {tool.version}: cached ({directory})")
    else:
        log(f"{tool.name} {tool.version}: obtaining (a cold build can take several minutes)...")
        started = time.monotonic()
        directory.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{tool.name}-", dir=directory.parent))
        try:
            tool.obtain(tool, staging)
            missing = [b for b in tool.binaries if not (staging / b).exists()]
            if missing:
                raise BootstrapError(
                    f"could not obtain {tool.name}: no {', '.join(missing)} produced"
                )
            if directory.exists():
                shutil.rmtree(directory)
            staging.rename(directory)
        finally:
            if staging.exists():
                shutil.rmtree(staging, ignore_errors=True)
        log(f"{tool.name} {tool.version}: ready in {time.monotonic() - started:.0f}s")
    for binary in tool.binaries:
        link = BIN_DIR / binary
        link.parent.mkdir(parents=True, exist_ok=True)
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(directory / binary)
    return directory


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.bootstrap",
        description="Obtain the pinned upstream tools (OPA, etcd, Kubernetes, KWOK, Pulumi, "
        "Volcano, Prometheus, containerd and friends) into tools/bin, reusing the per-user cache.",
    )
    parser.add_argument("tools", nargs="*", help="only these tools (default: all)")
    parser.add_argument("--list", action="store_true", help="show pins and cache state, do nothing")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(f"[bootstrap] {message}", flush=True)

    try:
        tools = pinned_tools()
    except BootstrapError as error:
        log(str(error))
        return 1
    known = {tool.name for tool in tools}
    unknown = sorted(set(args.tools) - known)
    if unknown:
        parser.error(f"unknown tool(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    selected = [tool for tool in tools if not args.tools or tool.name in args.tools]
    if args.list:
        for tool in selected:
            state = "cached" if tool.is_cached() else "missing"
            print(f"{tool.name:26} {tool.version:10} {state:8} {tool.cache_dir()}")
        return 0
    started = time.monotonic()
    for tool in selected:
        try:
            obtain(tool, log=log)
        except BootstrapError as error:
            log(f"FAILED: {error}")
            return 1
    log(f"all tools ready in {time.monotonic() - started:.0f}s: {BIN_DIR}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
