"""A minimal Debian root filesystem for the controller, from Debian's packages, no base image.

`mmdebstrap --variant=extract` unpacks Python 3.11 and the libraries it links, and nothing else:
no package manager run, no maintainer scripts, no shell (no package here needs one; the image
runs its entry script with Python directly). Each unpacked package's control fields are kept in
`/var/lib/dpkg/status.d/<package>`, where image scanners (trivy, grype, syft) look for them in
distroless-style images.

Debian's archive moves (point and security releases), so the same recipe gives a different tar
from one month to the next. The tar is therefore cached per recipe, and its sha256 is recorded
in `images/rootfs.lock.json`: a build from the cached tar is byte-identical; a build on a machine
without it says when the fresh tar differs from the recorded one.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
LOCK_FILE = HERE / "rootfs.lock.json"
CACHE_ENV = "FLEETPLANE_IMAGE_CACHE"

SUITE = "bookworm"
PACKAGES = ("python3.11-minimal", "libpython3.11-stdlib", "libstdc++6")
"""The interpreter and its standard library; their dependencies come with them (libc, libssl,
libffi, zlib, ...). libstdc++: manylinux wheels may link it from the system (pysimdjson does)."""
DPKG_EXCLUDES = ("/usr/share/man/*", "/usr/share/locale/*", "/usr/share/doc/*", "/usr/share/info/*")
SOURCE_DATE_EPOCH = "0"

# Written by mmdebstrap's extract hook (the extract variant runs no other), on the host, while the downloaded .debs are still in
# the chroot's apt cache: one control paragraph per package, as distroless images do.
STATUS_HOOK = (
    'mkdir -p "$1/var/lib/dpkg/status.d" && '
    'for deb in "$1"/var/cache/apt/archives/*.deb; do '
    'name=$(dpkg-deb -f "$deb" Package); '
    'dpkg-deb -f "$deb" Package Version Architecture Source Maintainer Homepage '
    '> "$1/var/lib/dpkg/status.d/$name"; '
    "done"
)


class RootfsError(RuntimeError):
    """mmdebstrap is missing or failed; the message says how to go on."""


@dataclass(frozen=True)
class Rootfs:
    tar: Path
    sha256: str
    recorded: str | None
    """The sha256 in images/rootfs.lock.json for this recipe, if any."""
    built: bool
    """True when mmdebstrap ran now; False when the cached tar was used."""

    @property
    def matches_record(self) -> bool:
        return self.recorded == self.sha256


def recipe() -> dict[str, object]:
    """Everything that decides the tar, apart from the state of Debian's archive."""
    return {
        "suite": SUITE,
        "variant": "extract",
        "packages": list(PACKAGES),
        "dpkg_excludes": list(DPKG_EXCLUDES),
        "hooks": ["merged-usr", f"extract: {STATUS_HOOK}"],
        "source_date_epoch": SOURCE_DATE_EPOCH,
    }


def recipe_key() -> str:
    blob = json.dumps(recipe(), sort_keys=True).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def cache_dir() -> Path:
    explicit = os.environ.get(CACHE_ENV)
    if explicit:
        return Path(explicit)
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "fleetplane" / "images"


def recorded_sha256() -> str | None:
    if not LOCK_FILE.exists():
        return None
    record = json.loads(LOCK_FILE.read_text())
    return record.get("sha256") if record.get("recipe") == recipe_key() else None


def record(rootfs: Rootfs) -> None:
    """Write the tar's sha256 (and the package versions in it) to images/rootfs.lock.json."""
    LOCK_FILE.write_text(
        json.dumps(
            {
                "recipe": recipe_key(),
                "suite": SUITE,
                "sha256": rootfs.sha256,
                "packages": debian_packages(rootfs.tar),
            },
            indent=2,
        )
        + "\n"
    )


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def obtain(*, rebuild: bool = False, log=print) -> Rootfs:
    """The cached tar for this recipe, or a fresh one from mmdebstrap (then cached)."""
    cache = cache_dir()
    tar = cache / f"rootfs-{SUITE}-{recipe_key()}.tar"
    recorded = recorded_sha256()
    if tar.exists() and not rebuild:
        return Rootfs(tar=tar, sha256=sha256_file(tar), recorded=recorded, built=False)
    mmdebstrap = shutil.which("mmdebstrap")
    if mmdebstrap is None:
        raise RootfsError(
            "mmdebstrap not found: install Debian's package (`apt-get install mmdebstrap`), "
            "it is what builds the image's root filesystem from Debian's archive"
        )
    if os.geteuid() != 0:
        raise RootfsError("building the root filesystem needs root (mmdebstrap --mode=root)")
    cache.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=cache) as scratch:
        out = Path(scratch) / "rootfs.tar"
        command = [
            mmdebstrap,
            "--mode=root",
            "--variant=extract",
            f"--include={','.join(PACKAGES)}",
            "--hook-dir=/usr/share/mmdebstrap/hooks/merged-usr",
            *(f"--dpkgopt=path-exclude={pattern}" for pattern in DPKG_EXCLUDES),
            f"--extract-hook={STATUS_HOOK}",
            "--skip=output/dev",
            "--quiet",
            SUITE,
            str(out),
        ]
        log(f"mmdebstrap: {SUITE} {', '.join(PACKAGES)} (Debian's archive as apt is configured)")
        env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}
        result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            raise RootfsError(f"mmdebstrap failed ({result.returncode}): {result.stderr[-2000:]}")
        out.replace(tar)
    sha = sha256_file(tar)
    if recorded and recorded != sha:
        log(
            f"note: the fresh root filesystem ({sha[:12]}) differs from the recorded one "
            f"({recorded[:12]}): Debian's archive has moved since; image digests will differ "
            "from the recorded ones (`fleetplane image build --record-rootfs` records it)"
        )
    return Rootfs(tar=tar, sha256=sha, recorded=recorded, built=True)


def debian_packages(tar: Path) -> dict[str, str]:
    """{package: version} from the tar's var/lib/dpkg/status.d."""
    import tarfile

    found: dict[str, str] = {}
    with tarfile.open(tar) as archive:
        for member in archive:
            if (
                "/var/lib/dpkg/status.d/" not in f"/{member.name.lstrip('./')}"
                or not member.isfile()
            ):
                continue
            handle = archive.extractfile(member)
            assert handle is not None
            fields = parse_control(handle.read().decode())
            found[fields["Package"]] = fields["Version"]
    return dict(sorted(found.items()))


def parse_control(text: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    for line in text.splitlines():
        if ":" in line and not line.startswith(" "):
            key, _, value = line.partition(":")
            fields[key.strip()] = value.strip()
    return fields
