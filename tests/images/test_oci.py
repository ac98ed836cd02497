"""The OCI layout writer: the same files give the same bytes, whatever the files' times."""

from __future__ import annotations

import json
import os
import tarfile
from pathlib import Path

from images import oci


def _tree(root: Path, mtime: int) -> None:
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "tool").write_text("#!tool\n")
    (root / "usr" / "bin" / "tool").chmod(0o755)
    (root / "etc").mkdir()
    (root / "etc" / "b").write_text("b")
    (root / "etc" / "a").write_text("a")
    os.symlink("usr/bin", root / "bin")
    for directory, dirs, files in os.walk(root):
        for name in [*dirs, *files]:
            os.utime(Path(directory) / name, (mtime, mtime), follow_symlinks=False)


def _image(tmp: Path, mtime: int) -> oci.Image:
    root = tmp / f"root-{mtime}"
    _tree(root, mtime)
    layout = tmp / f"layout-{mtime}"
    layer = oci.write_layer(
        layout,
        oci.layer_from_tree(root, extra=[oci.Entry(path="etc/passwd", data=b"root:x:0:0::/:/x\n")]),
        "files",
    )
    return oci.write_image(layout, [layer], oci.ImageConfig(user="65532"), ref_name="t")


def test_same_files_at_other_times_give_the_same_digest(tmp_path: Path) -> None:
    first, second = _image(tmp_path, 1_000), _image(tmp_path, 2_000_000)
    assert first.digest == second.digest
    assert first.layers[0].diff_id == second.layers[0].diff_id


def test_layer_is_sorted_with_fixed_times_and_numeric_owners(tmp_path: Path) -> None:
    image = _image(tmp_path, 5)
    blob = image.layout / "blobs" / "sha256" / image.layers[0].blob.digest.split(":")[1]
    with tarfile.open(blob) as tar:
        members = tar.getmembers()
    names = [m.name for m in members]
    assert names == sorted(names)
    assert "etc/passwd" in names and "bin" in names
    assert {m.mtime for m in members} == {0}
    assert {(m.uname, m.gname) for m in members} == {("", "")}
    assert next(m for m in members if m.name == "bin").linkname == "usr/bin"


def test_layout_reads_back(tmp_path: Path) -> None:
    image = _image(tmp_path, 5)
    again = oci.read_image(image.layout)
    assert again.digest == image.digest
    assert again.layers == image.layers
    index = json.loads((image.layout / "index.json").read_text())
    assert index["manifests"][0]["annotations"][oci.REF_NAME] == "t"
    blobs = {p.name for p in (image.layout / "blobs" / "sha256").iterdir()}
    assert blobs == {
        d.split(":")[1] for d in (image.digest, image.config.digest, image.layers[0].blob.digest)
    }
