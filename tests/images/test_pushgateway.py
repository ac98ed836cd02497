"""The Pushgateway's image, built for real from the pinned binary and the images' Debian root
filesystem: reproducible, non-root, the binary and the C library it links and nothing else,
with a valid SBOM naming the Debian package it came from; and it serves."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from images import build, oci, rootfs
from images.pushgateway import build_pushgateway, find_pushgateway, reported_version

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def base() -> rootfs.Rootfs:
    return rootfs.obtain()


@pytest.fixture(scope="module")
def built(base: rootfs.Rootfs, tmp_path_factory: pytest.TempPathFactory) -> build.Built:
    return build_pushgateway(
        tmp_path_factory.mktemp("pg") / "pushgateway",
        binary_path=find_pushgateway(),
        rootfs_tar=base.tar,
    )


def files(image: oci.Image) -> dict[str, tarfile.TarInfo]:
    found: dict[str, tarfile.TarInfo] = {}
    for layer in image.layers:
        blob = image.layout / "blobs" / "sha256" / layer.blob.digest.split(":")[1]
        with tarfile.open(blob) as tar:
            found.update({m.name: m for m in tar.getmembers()})
    return found


def test_the_same_inputs_give_the_same_digest(
    built: build.Built, base: rootfs.Rootfs, tmp_path: Path
) -> None:
    again = build_pushgateway(
        tmp_path / "pushgateway", binary_path=find_pushgateway(), rootfs_tar=base.tar
    )
    assert again.image.digest == built.image.digest


def test_the_image_is_the_binary_and_the_c_library_it_links(built: build.Built) -> None:
    config = json.loads(oci.read_blob(built.image.layout, built.image.config.digest))["config"]
    assert config["User"] == "65534:65534"
    assert config["Entrypoint"] == ["/pushgateway"]
    found = files(built.image)
    assert found["pushgateway"].mode & 0o111
    assert set(found) <= {
        "pushgateway",
        "etc/passwd",
        "etc/group",
        "lib64/ld-linux-x86-64.so.2",
        "lib/x86_64-linux-gnu/libc.so.6",
        "etc",
        "lib",
        "lib64",
        "lib/x86_64-linux-gnu",
    }
    assert "bin/sh" not in found


def test_the_sbom_names_the_debian_package_and_what_it_links(built: build.Built) -> None:
    assert built.sbom is not None
    text = built.sbom.read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    bom = json.loads(text)
    version, revision, go = reported_version(find_pushgateway())
    subject = bom["metadata"]["component"]
    assert subject["name"] == "prometheus-pushgateway" and subject["version"] == revision
    assert revision.startswith(version) and go.startswith("go")
    debian = {c["name"] for c in bom["components"] if c["purl"].startswith("pkg:deb/")}
    assert debian == (
        {"libc6"} if "lib/x86_64-linux-gnu/libc.so.6" in files(built.image) else set()
    )
    properties = {p["name"]: p["value"] for p in bom["metadata"]["properties"]}
    assert properties["fleetplane:image:digest"] == built.image.digest


def test_the_binary_the_image_carries_runs_with_only_what_the_image_holds(
    built: build.Built, tmp_path: Path
) -> None:
    """The image's files unpacked as a root filesystem: its own loader runs its binary."""
    root = tmp_path / "root"
    for layer in built.image.layers:
        blob = built.image.layout / "blobs" / "sha256" / layer.blob.digest.split(":")[1]
        with tarfile.open(blob) as tar:
            tar.extractall(root, filter="tar")
    loader = root / "lib64" / "ld-linux-x86-64.so.2"
    argv = [str(root / "pushgateway"), "--version"]
    if loader.exists():
        argv = [str(loader), "--library-path", str(root / "lib/x86_64-linux-gnu"), *argv]
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "pushgateway, version" in done.stdout + done.stderr
