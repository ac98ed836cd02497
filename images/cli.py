"""`fleetplane image build|lock`: the controller's and OPA's images, as OCI layouts."""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from typing import Any

EXIT_CODES = "exit status: 0 built; 2 a tool is missing or a build step failed (the message says)."
DEFAULT_OUT = Path(".fleet") / "images"


def add_parser(subparsers: Any) -> None:
    image: argparse.ArgumentParser = subparsers.add_parser(
        "image",
        help="build the controller's (with the placement service), the validator's, OPA's and "
        "the Pushgateway's OCI images (reproducible, with an SBOM)",
        description="The platform's images, built from Debian's packages and the lock file, "
        f"without a base image or a container daemon. {EXIT_CODES}",
    )
    actions = image.add_subparsers(dest="image_command", required=True, metavar="ACTION")
    build = actions.add_parser(
        "build",
        help="build the images into OCI layouts (each with its SBOM)",
        description="Build OCI image layouts: OUT/controller (also the placement service's: "
        "fleetplane-placement), OUT/validator (the controller's image plus nvidia-ml-py, for "
        "the validator pod), OUT/opa and OUT/pushgateway, each with its SBOM "
        "(OUT/NAME.cdx.json), and print their digests and sizes. Needs "
        f"root and mmdebstrap. {EXIT_CODES}",
    )
    build.add_argument(
        "--out", type=Path, default=DEFAULT_OUT, help=f"output directory (default {DEFAULT_OUT})"
    )
    build.add_argument(
        "--only",
        choices=("controller", "validator", "opa", "pushgateway"),
        action="append",
        help="build only this image",
    )
    build.add_argument(
        "--rebuild-rootfs",
        action="store_true",
        help="run mmdebstrap again instead of using the cached root filesystem",
    )
    build.add_argument(
        "--record-rootfs",
        action="store_true",
        help="record the root filesystem's sha256 in images/rootfs.lock.json",
    )
    build.add_argument("--opa", type=Path, default=None, help="the OPA binary (default: pinned)")
    build.add_argument(
        "--pushgateway",
        type=Path,
        default=None,
        help="the Pushgateway binary (default: pinned)",
    )
    build.set_defaults(run=run_build)
    lock = actions.add_parser(
        "lock",
        help="re-resolve images/controller-requirements.txt (uv pip compile, with hashes)",
        description="Resolve the controller's base dependencies for CPython 3.11 on manylinux "
        f"x86-64 into the committed lock file, with hashes. {EXIT_CODES}",
    )
    lock.set_defaults(run=run_lock)


def run_build(args: argparse.Namespace) -> int:
    from images import build, rootfs

    def log(message: str) -> None:
        print(f"image: {message}", file=sys.stderr)

    wanted = args.only or ["controller", "validator", "opa", "pushgateway"]
    try:
        base = rootfs.obtain(rebuild=args.rebuild_rootfs, log=log)
        if args.record_rootfs:
            rootfs.record(base)
            base = dataclasses.replace(base, recorded=base.sha256)
        state = "recorded" if base.matches_record else "NOT the recorded one"
        log(f"root filesystem {base.sha256[:12]} ({state}; cached at {base.tar})")
        results = []
        if "controller" in wanted:
            results.append(
                build.build_controller(args.out / "controller", rootfs_tar=base.tar, log=log)
            )
        if "validator" in wanted:
            results.append(
                build.build_validator(args.out / "validator", rootfs_tar=base.tar, log=log)
            )
        if "opa" in wanted:
            results.append(opa_image(args.out / "opa", rootfs_tar=base.tar, explicit=args.opa))
        if "pushgateway" in wanted:
            from images import pushgateway

            results.append(
                pushgateway.build_pushgateway(
                    args.out / "pushgateway",
                    binary_path=pushgateway.find_pushgateway(args.pushgateway),
                    rootfs_tar=base.tar,
                )
            )
    except (rootfs.RootfsError, build.BuildError) as error:
        print(f"image build: {error}", file=sys.stderr)
        return 2
    for built in results:
        build.write_summary(built)
        print(describe(built))
    return 0


def opa_image(out: Path, *, rootfs_tar: Path, explicit: Path | None = None) -> Any:
    import subprocess

    from images import build

    binary = find_opa(explicit)
    version = subprocess.run(
        [str(binary), "version"], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    return build.build_opa(out, opa_binary=binary, rootfs_tar=rootfs_tar, version=version)


def find_opa(explicit: Path | None = None) -> Path:
    """`explicit`, else the checkout's pinned tools/bin/opa (FLEETPLANE_BIN_DIR), else the PATH."""
    import os
    import shutil

    from images import build

    if explicit:
        return explicit
    pinned = Path(os.environ.get("FLEETPLANE_BIN_DIR") or build.PROJECT / "tools" / "bin") / "opa"
    if pinned.exists():
        return pinned
    found = shutil.which("opa")
    if found is None:
        raise build.BuildError("no opa binary: `make tools`, or pass --opa PATH")
    return Path(found)


def describe(built: Any) -> str:
    image = built.image
    lines = [
        f"{built.name}: {image.digest}",
        f"  layout {image.layout}  ({mib(image.compressed_size)} compressed, built in "
        f"{built.seconds:.1f} s)",
    ]
    for part, size in (built.contents or {}).items():
        lines.append(f"  {mib(size):>10}  {part}")
    if built.sbom:
        lines.append(f"  SBOM {built.sbom}")
    return "\n".join(lines)


def mib(size: int) -> str:
    return f"{size / (1 << 20):.1f} MiB"


def run_lock(args: argparse.Namespace) -> int:
    import shutil
    import subprocess

    from images import build

    uv = Path(sys.executable).parent / "uv"
    uv_path = str(uv) if uv.exists() else shutil.which("uv")
    if uv_path is None:
        print("image lock: uv not found (`pip install uv`, a dev extra)", file=sys.stderr)
        return 2
    command = [uv_path, *LOCK_COMMAND, "-o", str(build.LOCK)]
    result = subprocess.run(command, cwd=build.PROJECT, check=False)
    return 0 if result.returncode == 0 else 2


LOCK_COMMAND = [
    "pip",
    "compile",
    "pyproject.toml",
    "--generate-hashes",
    "--python-version=3.11",
    "--python-platform=x86_64-manylinux_2_28",
    "--only-binary=:all:",
    "--custom-compile-command=fleetplane image lock",
    "--quiet",
]
"""The base dependencies (no extras) for the image's CPython 3.11 on manylinux x86-64."""
