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

The package, one concern a module: `tool` (a tool, its cache folder keyed by its recipe, running
a recipe's step), `go` (the Go toolchain, OPA, etcd, KWOK, Kubernetes), `pulumi`, `volcano`,
`operators` (JobSet, LeaderWorkerSet, KubeRay, Kubeflow Trainer), `debian` (tools unpacked from
Debian's archive), `pins` (every pinned tool) and `cli` (the command line, run by `__main__`).
"""

from tools.bootstrap.cli import main, obtain
from tools.bootstrap.pins import pinned_tools
from tools.bootstrap.tool import BIN_DIR, GO_DIR, ROOT, BootstrapError, Tool, cache_root

__all__ = [
    "BIN_DIR",
    "GO_DIR",
    "ROOT",
    "BootstrapError",
    "Tool",
    "cache_root",
    "main",
    "obtain",
    "pinned_tools",
]
