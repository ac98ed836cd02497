"""OCI image layouts written with the standard library, byte for byte the same on every build.

An image layout (https://github.com/opencontainers/image-spec/blob/main/image-layout.md) is
blobs named by their sha256, a manifest naming a config and layers, `index.json` and
`oci-layout`. What makes the digests reproducible is in `layer_from_tree`: names sorted, every
mtime fixed, numeric owners without names, no device files, hard links kept as links in a fixed
order, and gzip with mtime 0 and a fixed level.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MEDIA_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MEDIA_INDEX = "application/vnd.oci.image.index.v1+json"
MEDIA_CONFIG = "application/vnd.oci.image.config.v1+json"
MEDIA_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"
REF_NAME = "org.opencontainers.image.ref.name"

EPOCH = 0
"""Every file's mtime, and the image's `created`: 1970-01-01, so that nothing of the build
time leaks into a digest."""


@dataclass(frozen=True)
class Blob:
    digest: str
    size: int
    media_type: str

    def descriptor(self, annotations: dict[str, str] | None = None) -> dict[str, Any]:
        out: dict[str, Any] = {"mediaType": self.media_type, "digest": self.digest}
        out["size"] = self.size
        if annotations:
            out["annotations"] = annotations
        return out


@dataclass(frozen=True)
class Layer:
    blob: Blob
    diff_id: str
    """sha256 of the uncompressed tar (the config's rootfs.diff_ids)."""
    comment: str


@dataclass(frozen=True)
class Image:
    """A written image: its manifest digest names it (`repo@sha256:...`)."""

    layout: Path
    manifest: Blob
    config: Blob
    layers: tuple[Layer, ...]

    @property
    def digest(self) -> str:
        return self.manifest.digest

    @property
    def compressed_size(self) -> int:
        """What a pull downloads: the manifest, the config and every layer, compressed."""
        return self.manifest.size + self.config.size + sum(lay.blob.size for lay in self.layers)


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def write_blob(layout: Path, data: bytes, media_type: str) -> Blob:
    digest = _sha256(data)
    path = layout / "blobs" / "sha256" / digest.split(":", 1)[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_bytes(data)
    return Blob(digest=digest, size=len(data), media_type=media_type)


def read_blob(layout: Path, digest: str) -> bytes:
    return (layout / "blobs" / "sha256" / digest.split(":", 1)[1]).read_bytes()


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no spaces: the same bytes for the same document."""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


# --- layers ---------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One file of a layer that is not on disk (a generated /etc/passwd, an entry script)."""

    path: str
    data: bytes = b""
    mode: int = 0o644
    uid: int = 0
    gid: int = 0
    kind: str = "file"  # file | dir | symlink
    target: str = ""


def _normalise(info: tarfile.TarInfo, name: str) -> tarfile.TarInfo:
    info.name = name
    info.mtime = EPOCH
    info.uname = ""
    info.gname = ""
    info.pax_headers = {}
    return info


def layer_from_tree(
    root: Path,
    *,
    include: Callable[[str], bool] = lambda path: True,
    extra: Iterable[Entry] = (),
) -> bytes:
    """An uncompressed, reproducible tar of the files under `root` whose image path (relative,
    no leading slash, e.g. `usr/bin/python3.11`) passes `include`, plus `extra` entries (which
    win over files of the same path). Owners and modes are kept; devices, sockets and fifos are
    left out."""
    extras = {entry.path.strip("/"): entry for entry in extra}
    paths: list[str] = []
    for directory, dirnames, filenames in os.walk(root):
        dirnames.sort()
        base = Path(directory).relative_to(root).as_posix()
        for name in [*dirnames, *filenames]:
            rel = name if base == "." else f"{base}/{name}"
            if include(rel) and rel not in extras:
                paths.append(rel)
    for rel in list(extras):
        parent = rel.rpartition("/")[0]
        while parent:
            if parent not in extras and not (root / parent).exists():
                extras[parent] = Entry(path=parent, kind="dir", mode=0o755)
            parent = parent.rpartition("/")[0]
    names = sorted({*paths, *extras})
    buffer = io.BytesIO()
    seen_inodes: dict[tuple[int, int], str] = {}
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for rel in names:
            if rel in extras:
                _add_entry(tar, extras[rel])
                continue
            path = root / rel
            st = path.lstat()
            mode = st.st_mode
            info = tarfile.TarInfo(rel)
            info.mode = stat.S_IMODE(mode)
            info.uid, info.gid = st.st_uid, st.st_gid
            if stat.S_ISDIR(mode):
                info.type = tarfile.DIRTYPE
                tar.addfile(_normalise(info, rel))
            elif stat.S_ISLNK(mode):
                info.type = tarfile.SYMTYPE
                info.linkname = os.readlink(path)
                tar.addfile(_normalise(info, rel))
            elif stat.S_ISREG(mode):
                key = (st.st_dev, st.st_ino)
                if st.st_nlink > 1 and key in seen_inodes:
                    info.type = tarfile.LNKTYPE
                    info.linkname = seen_inodes[key]
                    tar.addfile(_normalise(info, rel))
                    continue
                seen_inodes[key] = rel
                info.size = st.st_size
                with path.open("rb") as handle:
                    tar.addfile(_normalise(info, rel), handle)
            # devices, fifos, sockets: never part of an image
    return buffer.getvalue()


def _add_entry(tar: tarfile.TarFile, entry: Entry) -> None:
    rel = entry.path.strip("/")
    info = tarfile.TarInfo(rel)
    info.mode, info.uid, info.gid = entry.mode, entry.uid, entry.gid
    if entry.kind == "dir":
        info.type = tarfile.DIRTYPE
        tar.addfile(_normalise(info, rel))
    elif entry.kind == "symlink":
        info.type = tarfile.SYMTYPE
        info.linkname = entry.target
        tar.addfile(_normalise(info, rel))
    else:
        info.size = len(entry.data)
        tar.addfile(_normalise(info, rel), io.BytesIO(entry.data))


def layer_from_entries(entries: Iterable[Entry]) -> bytes:
    """A layer of generated files only (a scratch image's binary, a passwd file)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.GNU_FORMAT) as tar:
        for entry in sorted(entries, key=lambda e: e.path.strip("/")):
            _add_entry(tar, entry)
    return buffer.getvalue()


def write_layer(layout: Path, tar_bytes: bytes, comment: str) -> Layer:
    """gzip (level 6, mtime 0, no file name) the tar into a blob."""
    compressed = io.BytesIO()
    with gzip.GzipFile(fileobj=compressed, mode="wb", compresslevel=6, mtime=0, filename="") as gz:
        gz.write(tar_bytes)
    blob = write_blob(layout, compressed.getvalue(), MEDIA_LAYER)
    return Layer(blob=blob, diff_id=_sha256(tar_bytes), comment=comment)


# --- the image ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class ImageConfig:
    """What the runtime reads from the image's config (the pod spec may override it)."""

    entrypoint: list[str] = field(default_factory=list)
    cmd: list[str] = field(default_factory=list)
    env: list[str] = field(default_factory=list)
    user: str = ""
    workdir: str = "/"
    labels: dict[str, str] = field(default_factory=dict)


def write_image(layout: Path, layers: list[Layer], config: ImageConfig, *, ref_name: str) -> Image:
    """The config, the manifest and `index.json` (one manifest, named `ref_name`)."""
    layout.mkdir(parents=True, exist_ok=True)
    config_doc: dict[str, Any] = {
        "architecture": "amd64",
        "os": "linux",
        "created": "1970-01-01T00:00:00Z",
        "config": {
            key: value
            for key, value in {
                "Entrypoint": config.entrypoint,
                "Cmd": config.cmd,
                "Env": config.env,
                "User": config.user,
                "WorkingDir": config.workdir,
                "Labels": config.labels,
            }.items()
            if value
        },
        "rootfs": {"type": "layers", "diff_ids": [layer.diff_id for layer in layers]},
        "history": [
            {"created": "1970-01-01T00:00:00Z", "created_by": layer.comment} for layer in layers
        ],
    }
    config_blob = write_blob(layout, canonical_json(config_doc), MEDIA_CONFIG)
    manifest_doc = {
        "schemaVersion": 2,
        "mediaType": MEDIA_MANIFEST,
        "config": config_blob.descriptor(),
        "layers": [layer.blob.descriptor() for layer in layers],
        "annotations": {
            key: value
            for key, value in config.labels.items()
            if key.startswith("org.opencontainers.image.")
        },
    }
    manifest_blob = write_blob(layout, canonical_json(manifest_doc), MEDIA_MANIFEST)
    index = {
        "schemaVersion": 2,
        "mediaType": MEDIA_INDEX,
        "manifests": [manifest_blob.descriptor({REF_NAME: ref_name})],
    }
    (layout / "index.json").write_bytes(canonical_json(index))
    (layout / "oci-layout").write_bytes(canonical_json({"imageLayoutVersion": "1.0.0"}))
    _remove_unreferenced(layout, {config_blob, manifest_blob, *(lay.blob for lay in layers)})
    return Image(layout=layout, manifest=manifest_blob, config=config_blob, layers=tuple(layers))


def _remove_unreferenced(layout: Path, keep: set[Blob]) -> None:
    wanted = {blob.digest.split(":", 1)[1] for blob in keep}
    for path in (layout / "blobs" / "sha256").iterdir():
        if path.name not in wanted:
            path.unlink()


def read_image(layout: Path) -> Image:
    """The one image of a layout written by `write_image`."""
    index = json.loads((layout / "index.json").read_text())
    desc = index["manifests"][0]
    manifest = json.loads(read_blob(layout, desc["digest"]))
    config_desc = manifest["config"]
    config = json.loads(read_blob(layout, config_desc["digest"]))
    layers = tuple(
        Layer(
            blob=Blob(d["digest"], d["size"], d["mediaType"]),
            diff_id=diff_id,
            comment=history.get("created_by", ""),
        )
        for d, diff_id, history in zip(
            manifest["layers"], config["rootfs"]["diff_ids"], config["history"], strict=True
        )
    )
    return Image(
        layout=layout,
        manifest=Blob(desc["digest"], desc["size"], desc["mediaType"]),
        config=Blob(config_desc["digest"], config_desc["size"], config_desc["mediaType"]),
        layers=layers,
    )
