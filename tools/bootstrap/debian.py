"""Tools taken out of Debian's .deb files (Prometheus and its companions, containerd, runc, the
CNI plugins, the registry, catatonit, and iptables with the libraries it needs)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tools.bootstrap.tool import BootstrapError, Tool, run

# --- Debian packages ----------------------------------------------------------------------------
#
# Taken out of Debian's .deb files without installing them system-wide (nothing lands in /usr,
# no service starts). A package's tool version is its upstream version: any Debian revision of it
# (a security update, say) is accepted, another upstream version is refused.


def debian_tool(*, name: str, package: str, version: str, files: dict[str, str]) -> Tool:
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
# The wrapper's text is part of the iptables cache key (`extra_key` below): it still names the
# file and function it was first written in (tools/bootstrap.py, since split into this package),
# so that the tools cached before the split are found. Changing a byte of it rebuilds iptables.
IPTABLES_WRAPPER = """#!/bin/sh
# {command} (nf_tables backend) from Debian's iptables package, with the libraries and
# extensions the package depends on unpacked beside it (tools/bootstrap.py, _iptables_tool).
here=$(dirname "$(readlink -f "$0")")
LD_LIBRARY_PATH="$here/lib" XTABLES_LIBDIR="$here/xtables" exec "$here/xtables-nft-multi" {command} "$@"
"""


def iptables_tool(version: str) -> Tool:
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
    if not is_upstream_version(candidate, tool.version):
        run(tool, ["apt-get", "update", "-qq"], cwd=work)
        candidate = _apt_candidate(package)
    if not is_upstream_version(candidate, tool.version):
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
    run(tool, ["apt-get", "download", "-qq", *wanted], cwd=work)
    for deb in sorted(work.glob("*.deb")):
        run(tool, ["dpkg-deb", "-x", str(deb), str(work / "root")], cwd=work)
    return work / "root"


def is_upstream_version(candidate: str, version: str) -> bool:
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
