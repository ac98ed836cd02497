"""The platform's two images, built from files, without a base image or a container daemon.

controller: the Debian root filesystem of `images/rootfs.py` (Python 3.11 and the libraries it
    links), the controller's Python dependencies installed from the committed lock file
    (`images/controller-requirements.txt`, `pip install --require-hashes`, wheels only), numpy
    for the placement service (`images/placement-requirements.txt`) and the project itself, as
    four layers, so that a change of code rebuilds only the last one. Non-root (65532), no
    shell, no package manager; every .pyc is compiled ahead with unchecked-hash invalidation,
    so nothing is written at run time (read-only root filesystem). Two entry points: the
    controller's `fleetplane` (the image's) and `fleetplane-placement`, the FGD placement
    service Volcano's extender calls (`volcano.placement: fgd`, which runs this image by
    default). One image rather than a placement image of its own: the service needs the
    controller's dependencies (pysimdjson, orjson) plus numpy only, the fleet already pulls
    the controller's image by digest, and a second image would be those same layers plus one.
opa: the pinned OPA binary from tools/bin, plus, when that binary is linked dynamically (the
    bootstrap builds it with cgo), the C library it links, taken from the same Debian root
    filesystem. Non-root (1000).

validator: the controller's image (the same four layers, so the same blobs) with one more layer
    before the project's, the NVML binding from `images/validator-requirements.txt`: what the
    validator pod runs (`fleetplane controller upgrade validate`, the NVML health check).

Each image gets its SBOM beside its layout (OUT/NAME.cdx.json, `images/sbom.py`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from images import oci, rootfs

HERE = Path(__file__).resolve().parent
PROJECT = HERE.parent
LOCK = HERE / "controller-requirements.txt"
PLACEMENT_LOCK = HERE / "placement-requirements.txt"
"""What the placement service adds to LOCK (numpy), as a layer of its own."""
VALIDATOR_LOCK = HERE / "validator-requirements.txt"
"""What the validator image installs on top of LOCK (nvidia-ml-py), as a layer of its own."""

PYTHON = "python3.11"
SITE = "usr/local/lib/python3.11/dist-packages"
"""Debian's Python puts /usr/local/lib/python3.X/dist-packages on sys.path: no venv needed."""
CONTROLLER_UID = 65532
OPA_UID = 1000
GLIBC_PACKAGE = "libc6"
"""The Debian package of the loader and C library a dynamically linked OPA gets."""

ENTRY_SCRIPT = f"""#!/usr/bin/{PYTHON} -IBu
# -I: isolated (no PYTHON* variables, no user site, no current directory on sys.path);
# -B: never write bytecode (the root filesystem is read-only; it is compiled ahead);
# -u: unbuffered, so JSON log lines reach the container log as they are written.
import sys

from fleetplane.cli import main

sys.exit(main())
""".encode()

PLACEMENT_ENTRY = "usr/local/bin/fleetplane-placement"
"""The placement service's entry point in the controller's image (the Deployment's command)."""
PLACEMENT_ENTRY_SCRIPT = f"""#!/usr/bin/{PYTHON} -IBu
# The FGD placement service Volcano's extender calls (`python -m placement`); flags as its --help.
import sys

from placement.cli import main

sys.exit(main())
""".encode()

PRUNE = (
    "var/cache/apt",
    "var/lib/apt",
    "var/log",
    "etc/apt",
    "usr/share/lintian",
    "usr/share/bug",
    "usr/share/info",
    "usr/share/doc",
    "usr/share/man",
    "usr/share/locale",
    "usr/share/polkit-1",
    "usr/share/binfmts",
    "usr/lib/binfmt.d",
    "usr/lib/systemd",
    "usr/lib/mime",
    "var/lib/dpkg/status-old",
    "var/lib/dpkg/lock",
    "var/lib/dpkg/lock-frontend",
    "var/lib/dpkg/triggers",
    "var/lib/dpkg/info",
    "var/lib/dpkg/updates",
    "var/lib/dpkg/parts",
    "var/lib/dpkg/alternatives",
)
"""Package-manager state and documentation: nothing at run time reads them. What scanners read
(var/lib/dpkg/status.d) stays."""

# pip may choose any of these wheels for the image's CPython 3.11 on glibc 2.36 (Debian 12).
PLATFORMS = (
    "manylinux_2_36_x86_64",
    *(f"manylinux_2_{minor}_x86_64" for minor in range(35, 16, -1)),
    "manylinux2014_x86_64",
    "linux_x86_64",
)


SOURCE_IGNORED = (
    ".git",
    ".venv",
    ".fleet",
    "build",
    "dist",
    "*.egg-info",
    "__pycache__",
    ".*_cache",
    "bin",
    "reports",
)
"""Not copied from the checkout to build the wheel (tools/bin: the pinned binaries)."""


class BuildError(RuntimeError):
    """A step of an image build failed; the message says which."""


@dataclass(frozen=True)
class Built:
    name: str
    image: oci.Image
    seconds: float
    sbom: Path | None = None
    contents: dict[str, int] | None = None
    """Uncompressed bytes per part of the image (for the size report)."""


def _run(command: list[str], *, what: str, **kwargs) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, capture_output=True, text=True, check=False, **kwargs)
    if result.returncode != 0:
        raise BuildError(f"{what} failed ({result.returncode}): {result.stderr[-3000:]}")
    return result


RUN_TIME_PROGRAMS = {f"usr/bin/{PYTHON}"}
"""The only program of the root filesystem the image runs. dpkg, tar and update-alternatives
come with the extracted packages' dependencies; nothing at run time calls them."""


def _prune(root: Path) -> None:
    for directory in ("usr/bin", "usr/sbin"):
        for path in sorted((root / directory).glob("*")):
            if path.relative_to(root).as_posix() not in RUN_TIME_PROGRAMS:
                path.unlink()
    for rel in PRUNE:
        path = root / rel
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()


def _pip(*args: str, what: str) -> None:
    _run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], what=what)


def _install_dependencies(target: Path, lock: Path) -> None:
    platform_args = [arg for tag in PLATFORMS for arg in ("--platform", tag)]
    _pip(
        "install",
        "--quiet",
        "--require-hashes",
        "--no-deps",
        "--only-binary=:all:",
        "--no-compile",
        "--python-version=3.11",
        "--implementation=cp",
        "--abi=cp311",
        *platform_args,
        f"--target={target}",
        "-r",
        str(lock),
        what="pip install of the locked dependencies",
    )


def _install_project(target: Path, project: Path, scratch: Path) -> list[str]:
    """Build the project's wheel from the checkout and install it without dependencies; the
    top-level names it added."""
    wheels = scratch / "wheel"
    # From a clean copy: setuptools reuses a checkout's build/ directory, which keeps files
    # since deleted or changed, and the wheel would then depend on the checkout's history.
    source = scratch / "source"
    shutil.copytree(
        project,
        source,
        symlinks=True,
        ignore=shutil.ignore_patterns(*SOURCE_IGNORED),
    )
    _pip(
        "wheel",
        "--quiet",
        "--no-deps",
        "--no-build-isolation",
        f"--wheel-dir={wheels}",
        str(source),
        what="building the fleetplane wheel",
    )
    (wheel,) = wheels.glob("fleetplane-*.whl")
    before = set(os.listdir(target))
    _pip(
        "install",
        "--quiet",
        "--no-deps",
        "--no-compile",
        f"--target={target}",
        str(wheel),
        what="pip install of the fleetplane wheel",
    )
    added = sorted(set(os.listdir(target)) - before)
    # pip records where the wheel came from (a temporary path): not part of what was installed
    for dist_info in (target / name for name in added if name.endswith(".dist-info")):
        (dist_info / "direct_url.json").unlink(missing_ok=True)
        record = dist_info / "RECORD"
        lines = record.read_text().splitlines()
        record.write_text("".join(f"{line}\n" for line in lines if "/direct_url.json," not in line))
    shutil.rmtree(target / "bin", ignore_errors=True)  # scripts with the host's shebang
    return added


def _compile(root: Path, directories: list[str]) -> None:
    """Byte-compile with the image's own interpreter (chroot), unchecked-hash: the .pyc files
    depend on the sources only, and nothing checks or rewrites them at run time."""
    _run(
        [
            "chroot",
            str(root),
            f"/usr/bin/{PYTHON}",
            "-I",
            "-m",
            "compileall",
            "-q",
            "--invalidation-mode=unchecked-hash",
            *(f"/{d}" for d in directories),
        ],
        what="compileall in the image's root filesystem",
    )


SMOKE_IMPORTS = (
    "fleetplane.cli",
    "controller.reconcile",
    "controller.upgrade.rollout",
    "controller.observe.kube",
    "controller.act.opa",
    "placement.cli",
    "placement.service",
    "numpy",
)
"""What the CronJob's pod runs must import in the image, as its user, before the image exists:
a wheel that needs a system library the root filesystem lacks fails the build, not the pod."""


def _check_imports(root: Path, modules: tuple[str, ...] = SMOKE_IMPORTS) -> None:
    _run(
        [
            "chroot",
            f"--userspec={CONTROLLER_UID}:{CONTROLLER_UID}",
            str(root),
            f"/usr/bin/{PYTHON}",
            "-IB",
            "-c",
            "import importlib, sys; [importlib.import_module(m) for m in sys.argv[1:]]",
            *modules,
        ],
        what="importing the controller inside the image's root filesystem",
    )


def passwd_entries(user: str, uid: int) -> list[oci.Entry]:
    return [
        oci.Entry(
            path="etc/passwd",
            data=f"root:x:0:0:root:/root:/sbin/nologin\n{user}:x:{uid}:{uid}:{user}:/nonexistent:/sbin/nologin\n".encode(),
        ),
        oci.Entry(path="etc/group", data=f"root:x:0:\n{user}:x:{uid}:\n".encode()),
    ]


def _du(root: Path, include: Callable[[str], bool]) -> int:
    total = 0
    for directory, _dirs, files in os.walk(root):
        base = Path(directory).relative_to(root).as_posix()
        for name in files:
            rel = name if base == "." else f"{base}/{name}"
            path = Path(directory) / name
            if include(rel) and not path.is_symlink():
                total += path.lstat().st_size
    return total


@dataclass(frozen=True)
class PythonImage:
    """What tells the Python images apart: their name, the lock files installed (each its own
    layer, in order) and what the image says it is and runs."""

    name: str
    locks: tuple[Path, ...]
    cmd: list[str]
    description: str
    smoke_imports: tuple[str, ...]


CONTROLLER = PythonImage(
    name="controller",
    locks=(LOCK, PLACEMENT_LOCK),
    cmd=["controller", "reconcile"],
    description="fleetplane's in-cluster controller (`fleetplane controller reconcile`), run by "
    "a CronJob, and its FGD placement service (`fleetplane-placement`), run by a Deployment",
    smoke_imports=SMOKE_IMPORTS,
)
VALIDATOR = PythonImage(
    name="validator",
    locks=(LOCK, PLACEMENT_LOCK, VALIDATOR_LOCK),
    cmd=["controller", "upgrade", "validate"],
    description="fleetplane's node validator (`fleetplane controller upgrade validate`: the NVML "
    "health check), run pinned to a GPU node after a driver upgrade or a remediation",
    smoke_imports=(*SMOKE_IMPORTS, "pynvml", "controller.health.verdict"),
)


def build_controller(
    out: Path, *, rootfs_tar: Path, lock: Path = LOCK, project: Path = PROJECT, log=print
) -> Built:
    """The controller's image (and the placement service's) as an OCI layout in `out`."""
    spec = (
        CONTROLLER
        if lock == LOCK
        else dataclasses.replace(CONTROLLER, locks=(lock, *CONTROLLER.locks[1:]))
    )
    return build_python_image(out, spec, rootfs_tar=rootfs_tar, project=project, log=log)


def build_validator(out: Path, *, rootfs_tar: Path, project: Path = PROJECT, log=print) -> Built:
    """The validator pod's image (the controller's, plus nvidia-ml-py) as an OCI layout."""
    return build_python_image(out, VALIDATOR, rootfs_tar=rootfs_tar, project=project, log=log)


def build_python_image(
    out: Path, spec: PythonImage, *, rootfs_tar: Path, project: Path = PROJECT, log=print
) -> Built:
    """A Python image of this project as an OCI layout in `out`: the root filesystem, one layer
    per lock file, the project."""
    if os.geteuid() != 0:
        raise BuildError(f"the {spec.name} image is built as root (chroot, numeric owners)")
    started = time.monotonic()
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="fleetplane-image-", dir=out.parent) as tmp:
        scratch = Path(tmp)
        root = scratch / "root"
        root.mkdir()
        _run(
            ["tar", "-x", "--numeric-owner", "-f", str(rootfs_tar), "-C", str(root)],
            what="unpacking the root filesystem",
        )
        _prune(root)
        site = root / SITE
        site.mkdir(parents=True, exist_ok=True)
        per_lock: list[set[str]] = []
        for lock in spec.locks:
            log(f"pip install --require-hashes -r {lock.name}")
            before = set(os.listdir(site))
            _install_dependencies(site, lock)
            per_lock.append(set(os.listdir(site)) - before)
        log("fleetplane wheel from the checkout")
        project_names = set(_install_project(site, project, scratch))
        log("compileall (stdlib, dependencies, fleetplane)")
        _compile(root, [f"usr/lib/{PYTHON}", SITE])
        _check_imports(root, spec.smoke_imports)

        def in_base(rel: str) -> bool:
            return not (rel == "usr/local" or rel.startswith("usr/local/"))

        def top(rel: str) -> str | None:
            if not rel.startswith(SITE + "/"):
                return None
            return rel[len(SITE) + 1 :].split("/", 1)[0]

        def in_lock(index: int) -> Callable[[str], bool]:
            def include(rel: str) -> bool:
                if not rel.startswith("usr/local"):
                    return False
                name = top(rel)
                if name is None:
                    # usr/local, usr/local/lib, ... the directories leading there: first layer
                    return index == 0
                return name in per_lock[index]

            return include

        def in_project(rel: str) -> bool:
            return top(rel) in project_names

        layout = out
        shutil.rmtree(layout, ignore_errors=True)
        log("layers")
        app_extra = [
            *passwd_entries("nonroot", CONTROLLER_UID),
            oci.Entry(path="usr/local/bin/fleetplane", data=ENTRY_SCRIPT, mode=0o755),
            oci.Entry(path=PLACEMENT_ENTRY, data=PLACEMENT_ENTRY_SCRIPT, mode=0o755),
            oci.Entry(path="tmp", kind="dir", mode=0o1777),
        ]
        layers = [
            oci.write_layer(
                layout,
                oci.layer_from_tree(root, include=in_base),
                f"debian {rootfs.SUITE}: {', '.join(rootfs.PACKAGES)} (mmdebstrap)",
            ),
            *(
                oci.write_layer(
                    layout,
                    oci.layer_from_tree(root, include=in_lock(index)),
                    f"pip install --require-hashes -r {lock.name}",
                )
                for index, lock in enumerate(spec.locks)
            ),
            oci.write_layer(
                layout,
                oci.layer_from_tree(root, include=in_project, extra=app_extra),
                "fleetplane (wheel from the checkout), entry script, nonroot user",
            ),
        ]
        version = _project_version(project)
        image = oci.write_image(
            layout,
            layers,
            oci.ImageConfig(
                entrypoint=["/usr/local/bin/fleetplane"],
                cmd=spec.cmd,
                env=["PATH=/usr/local/bin:/usr/bin", "LANG=C.UTF-8"],
                user=f"{CONTROLLER_UID}:{CONTROLLER_UID}",
                labels={
                    "org.opencontainers.image.title": f"fleetplane-{spec.name}",
                    "org.opencontainers.image.version": version,
                    "org.opencontainers.image.licenses": "Apache-2.0",
                    "org.opencontainers.image.description": spec.description,
                },
            ),
            ref_name=version,
        )
        contents = {
            "debian (python 3.11 and its libraries)": _du(root, in_base),
            **{
                f"python dependencies ({lock.name})": _du(root, in_lock(index))
                for index, lock in enumerate(spec.locks)
            },
            "fleetplane": _du(root, in_project),
        }
        from images import sbom

        log("SBOM (CycloneDX)")
        sbom_path = out.parent / f"{out.name}.cdx.json"
        sbom.write_sbom(
            sbom_path,
            site=site,
            debian=rootfs.debian_packages(rootfs_tar),
            image=image,
            project=project,
        )
    return Built(
        name=spec.name,
        image=image,
        seconds=time.monotonic() - started,
        sbom=sbom_path,
        contents=contents,
    )


def _project_version(project: Path) -> str:
    import tomllib

    return str(tomllib.loads((project / "pyproject.toml").read_text())["project"]["version"])


def build_opa(out: Path, *, opa_binary: Path, rootfs_tar: Path, version: str) -> Built:
    """OPA alone (a static binary), or with the loader and C library it links, from the
    Debian root filesystem (same recorded tar as the controller's), and its SBOM."""
    started = time.monotonic()
    binary = opa_binary.resolve().read_bytes()
    entries, contents, debian = binary_entries("opa", binary, rootfs_tar)
    entries += passwd_entries("opa", OPA_UID)
    shutil.rmtree(out, ignore_errors=True)
    layer = oci.write_layer(out, oci.layer_from_entries(entries), f"opa {version}")
    image = oci.write_image(
        out,
        [layer],
        oci.ImageConfig(
            entrypoint=["/opa"],
            cmd=["run", "--server"],
            user=f"{OPA_UID}:{OPA_UID}",
            labels={
                "org.opencontainers.image.title": "opa",
                "org.opencontainers.image.version": version,
                "org.opencontainers.image.licenses": "Apache-2.0",
            },
        ),
        ref_name=version,
    )
    from images import gobuildinfo, sbom

    sbom_path = out.parent / f"{out.name}.cdx.json"
    try:
        sbom.write_opa_sbom(sbom_path, binary=binary, debian=debian, image=image)
    except (gobuildinfo.BuildInfoError, ValueError) as error:
        raise BuildError(f"the OPA image's SBOM: {error}") from error
    return Built(
        name="opa",
        image=image,
        seconds=time.monotonic() - started,
        sbom=sbom_path,
        contents=contents,
    )


def binary_entries(
    path: str, binary: bytes, rootfs_tar: Path
) -> tuple[list[oci.Entry], dict[str, int], dict[str, str]]:
    """A binary at `path` and, when it is linked dynamically, the loader and the C library it
    links, from the Debian root filesystem: the entries, their sizes, and the Debian package
    they came from ({} for a static binary)."""
    entries = [oci.Entry(path=path, data=binary, mode=0o755)]
    contents = {path: len(binary)}
    debian: dict[str, str] = {}
    if _interpreter(binary):
        debian = {GLIBC_PACKAGE: rootfs.debian_packages(rootfs_tar)[GLIBC_PACKAGE]}
        # The loader and the C library, at the paths the binary asks for, as regular files.
        with tarfile.open(rootfs_tar) as archive:
            members = {m.name.removeprefix("./").rstrip("/"): m for m in archive.getmembers()}
            for wanted in ("lib64/ld-linux-x86-64.so.2", "lib/x86_64-linux-gnu/libc.so.6"):
                member = members[_resolve(members, wanted)]
                handle = archive.extractfile(member)
                assert handle is not None
                data = handle.read()
                entries.append(oci.Entry(path=wanted, data=data, mode=0o755))
                contents["glibc (Debian libc6)"] = contents.get("glibc (Debian libc6)", 0) + len(
                    data
                )
    return entries, contents, debian


def _resolve(members: dict[str, tarfile.TarInfo], path: str, depth: int = 0) -> str:
    """`path` inside a root filesystem tar with every symbolic link followed (merged /usr:
    /lib64 -> usr/lib64, and links to versioned library files)."""
    if depth > 40:
        raise BuildError(f"symbolic link loop at {path}")
    parts = path.strip("/").split("/")
    for index in range(1, len(parts) + 1):
        prefix = "/".join(parts[:index])
        member = members.get(prefix)
        if member is not None and member.issym():
            target = member.linkname
            base = "" if target.startswith("/") else "/".join(parts[: index - 1])
            joined = os.path.normpath(f"{base}/{target}/" + "/".join(parts[index:])).strip("/")
            return _resolve(members, joined, depth + 1)
    return "/".join(parts)


def _interpreter(elf: bytes) -> bool:
    """Whether an ELF executable names a program interpreter (is dynamically linked)."""
    import struct

    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise BuildError("not a 64-bit ELF executable")
    phoff = struct.unpack_from("<Q", elf, 0x20)[0]
    phentsize, phnum = struct.unpack_from("<HH", elf, 0x36)
    return any(
        struct.unpack_from("<I", elf, phoff + i * phentsize)[0] == 3  # PT_INTERP
        for i in range(phnum)
    )


def summary(built: Built) -> dict[str, object]:
    """What `fleetplane image build` prints and writes beside the layout."""
    image = built.image
    return {
        "name": built.name,
        "digest": image.digest,
        "layout": str(image.layout),
        "compressed_bytes": image.compressed_size,
        "layers": [
            {"digest": lay.blob.digest, "bytes": lay.blob.size, "what": lay.comment}
            for lay in image.layers
        ],
        "contents_uncompressed_bytes": built.contents or {},
        "sbom": str(built.sbom) if built.sbom else None,
        "seconds": round(built.seconds, 1),
    }


def write_summary(built: Built) -> Path:
    path = built.image.layout.parent / f"{built.image.layout.name}.json"
    path.write_text(json.dumps(summary(built), indent=2) + "\n")
    return path
