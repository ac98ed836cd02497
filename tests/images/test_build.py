"""The controller's and OPA's images, built for real (mmdebstrap's root filesystem, pip from the
lock file, the checkout's wheel): reproducible, non-root, no shell, the lock file's dependencies
and nothing else, pushed to a registry under the same digest."""

from __future__ import annotations

import json
import re
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from images import build, gobuildinfo, oci, push, rootfs, sbom
from images.cli import find_opa
from localfleet.registry import Registry

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def base() -> rootfs.Rootfs:
    return rootfs.obtain()


@pytest.fixture(scope="module")
def controller(base: rootfs.Rootfs, tmp_path_factory: pytest.TempPathFactory) -> build.Built:
    return build.build_controller(
        tmp_path_factory.mktemp("first") / "controller", rootfs_tar=base.tar, log=lambda m: None
    )


@pytest.fixture(scope="module")
def opa(base: rootfs.Rootfs, tmp_path_factory: pytest.TempPathFactory) -> build.Built:
    return build.build_opa(
        tmp_path_factory.mktemp("opa") / "opa",
        opa_binary=find_opa(),
        rootfs_tar=base.tar,
        version="test",
    )


def _files(image: oci.Image) -> dict[str, tarfile.TarInfo]:
    found: dict[str, tarfile.TarInfo] = {}
    for layer in image.layers:
        blob = image.layout / "blobs" / "sha256" / layer.blob.digest.split(":")[1]
        with tarfile.open(blob) as tar:
            for member in tar.getmembers():
                found[member.name] = member
    return found


def _config(image: oci.Image) -> dict:
    return json.loads(oci.read_blob(image.layout, image.config.digest))


def test_rebuilding_from_the_same_inputs_gives_the_same_digest(
    controller: build.Built, base: rootfs.Rootfs, tmp_path: Path
) -> None:
    again = build.build_controller(tmp_path / "controller", rootfs_tar=base.tar, log=lambda m: None)
    assert again.image.digest == controller.image.digest
    assert [lay.blob.digest for lay in again.image.layers] == [
        lay.blob.digest for lay in controller.image.layers
    ]


def test_controller_runs_as_nonroot_with_no_shell_and_no_package_manager(
    controller: build.Built,
) -> None:
    config = _config(controller.image)["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["/usr/local/bin/fleetplane"]
    files = _files(controller.image)
    assert "usr/local/bin/fleetplane" in files
    programs = {n for n in files if n.startswith(("usr/bin/", "usr/sbin/"))}
    assert programs == {"usr/bin/python3.11"}
    for absent in ("bin/sh", "usr/bin/sh", "usr/bin/bash", "usr/bin/dash", "usr/bin/apt"):
        assert absent not in files, absent
    assert not any(name.startswith("var/lib/apt/") for name in files)
    assert "nonroot:x:65532:65532" in _read(controller.image, "etc/passwd")
    # compiled ahead for a read-only root filesystem: fleetplane's modules have their .pyc
    assert any(
        re.match(r"usr/local/lib/python3.11/dist-packages/controller/__pycache__/reconcile", n)
        for n in files
    )


def _read(image: oci.Image, path: str) -> str:
    text = ""
    for layer in image.layers:
        blob = image.layout / "blobs" / "sha256" / layer.blob.digest.split(":")[1]
        with tarfile.open(blob) as tar:
            try:
                handle = tar.extractfile(path)
            except KeyError:
                continue
            if handle is not None:
                text = handle.read().decode()
    return text


def test_python_dependencies_are_exactly_the_lock_files(controller: build.Built) -> None:
    assert controller.sbom is not None
    bom = json.loads(controller.sbom.read_text())
    installed = sbom.python_packages(bom)
    locked = {
        sbom.normalise(name): version
        for lock in (build.LOCK, build.PLACEMENT_LOCK)
        for name, version in re.findall(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)", lock.read_text(), re.M)
    }
    # fleetplane itself is the SBOM's subject (metadata.component), not one of its components
    assert bom["metadata"]["component"]["name"] == "fleetplane"
    assert installed == locked
    assert "kubernetes" not in installed and "pulumi" not in installed
    debian = {c["name"] for c in bom["components"] if c["purl"].startswith("pkg:deb/")}
    assert {"libc6", "python3.11-minimal", "libstdc++6"} <= debian
    assert bom["bomFormat"] == "CycloneDX"


def test_opa_image_is_the_binary_and_the_c_library_it_links(opa: build.Built) -> None:
    files = _files(opa.image)
    assert _config(opa.image)["config"]["User"] == "1000:1000"
    assert "opa" in files
    assert set(files) <= {
        "opa",
        "etc/passwd",
        "etc/group",
        "lib64/ld-linux-x86-64.so.2",
        "lib/x86_64-linux-gnu/libc.so.6",
        "etc",
        "lib",
        "lib64",
        "lib/x86_64-linux-gnu",
    }


def test_opa_image_has_an_sbom_of_what_is_linked_into_it(opa: build.Built) -> None:
    """Every Go module the binary's build information lists, the C library when it links one,
    and the image's digest: a valid CycloneDX document beside the layout."""
    assert opa.sbom is not None and opa.sbom.parent == opa.image.layout.parent
    text = opa.sbom.read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    bom = json.loads(text)
    binary = find_opa().resolve().read_bytes()
    info = gobuildinfo.read(binary)
    assert bom["metadata"]["component"]["name"] == "github.com/open-policy-agent/opa"
    assert info.main is not None
    assert bom["metadata"]["component"]["version"] == info.main.version
    linked = {(dep.replaced_by or dep).path: (dep.replaced_by or dep).version for dep in info.deps}
    assert sbom.go_modules(bom) == linked and len(linked) > 20
    debian = {c["name"] for c in bom["components"] if c["purl"].startswith("pkg:deb/")}
    assert debian == ({"libc6"} if "lib/x86_64-linux-gnu/libc.so.6" in _files(opa.image) else set())
    properties = {p["name"]: p["value"] for p in bom["metadata"]["properties"]}
    assert properties["fleetplane:image:digest"] == opa.image.digest


@pytest.fixture
def registry(tmp_path: Path) -> Iterator[Registry]:
    with Registry(work_dir=tmp_path / "registry") as running:
        yield running


def test_push_keeps_the_digest(opa: build.Built, registry: Registry) -> None:
    reference = push.push(opa.image.layout, registry.address, "fleetplane/opa", tag="test")
    assert reference == f"{registry.address}/fleetplane/opa@{opa.image.digest}"
    assert push.manifest_digest(registry.address, "fleetplane/opa", "test") == opa.image.digest
    # a second push sends no blob again and changes nothing
    assert push.push(opa.image.layout, registry.address, "fleetplane/opa") == reference


@pytest.fixture(scope="module")
def validator(base: rootfs.Rootfs, tmp_path_factory: pytest.TempPathFactory) -> build.Built:
    return build.build_validator(
        tmp_path_factory.mktemp("validator") / "validator", rootfs_tar=base.tar, log=lambda m: None
    )


def test_validator_is_the_controller_plus_the_nvml_binding(
    controller: build.Built, validator: build.Built
) -> None:
    """The validator image shares the controller's root filesystem and locked dependencies (the
    same blobs), adds one layer with nvidia-ml-py, and its SBOM names exactly its lock files."""
    own = [layer.blob.digest for layer in controller.image.layers]
    theirs = [layer.blob.digest for layer in validator.image.layers]
    assert theirs[:3] == own[:3]
    assert len(theirs) == len(own) + 1
    added = validator.image.layers[3]
    assert added.comment == f"pip install --require-hashes -r {build.VALIDATOR_LOCK.name}"
    blob = validator.image.layout / "blobs" / "sha256" / added.blob.digest.split(":")[1]
    with tarfile.open(blob) as tar:
        names = tar.getnames()
    assert any(name.endswith("dist-packages/pynvml.py") for name in names), names[:20]
    assert _config(validator.image)["config"]["Cmd"] == ["controller", "upgrade", "validate"]
    assert validator.sbom is not None
    installed = sbom.python_packages(json.loads(validator.sbom.read_text()))
    locked = {
        sbom.normalise(name): version
        for lock in (build.LOCK, build.PLACEMENT_LOCK, build.VALIDATOR_LOCK)
        for name, version in re.findall(r"^([A-Za-z0-9_.-]+)==([^\s\\]+)", lock.read_text(), re.M)
    }
    assert installed == locked
    assert "nvidia-ml-py" in installed


def test_the_controller_image_serves_placement_as_its_user(
    controller: build.Built, tmp_path: Path
) -> None:
    """`fleetplane-placement` (what the placement Deployment runs) starts from the image's own
    files as its non-root user, learns nothing it was not sent, and scores Volcano's request
    with the image's numpy."""
    import socket
    import subprocess
    import time
    import urllib.request

    from fleet.placement import ENTRYPOINT, HEALTH_PATH
    from tests.placement.test_service import node, post, task

    config = _config(controller.image)["config"]
    assert config["Labels"]["org.opencontainers.image.description"].count("fleetplane-placement")
    root = tmp_path / "root"
    root.mkdir()
    for layer in controller.image.layers:
        blob = controller.image.layout / "blobs" / "sha256" / layer.blob.digest.split(":")[1]
        subprocess.run(["tar", "-x", "--numeric-owner", "-f", blob, "-C", root], check=True)
    assert f"/{build.PLACEMENT_ENTRY}" == ENTRYPOINT  # what the Deployment runs
    assert (root / build.PLACEMENT_ENTRY).stat().st_mode & 0o111
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    uid = build.CONTROLLER_UID
    command = ["chroot", f"--userspec={uid}:{uid}", root, f"/{build.PLACEMENT_ENTRY}"]
    service = subprocess.Popen(
        [*map(str, command), "--host=127.0.0.1", f"--port={port}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert service.poll() is None, service.communicate()[0]
            try:
                with urllib.request.urlopen(url + HEALTH_PATH, timeout=2) as response:
                    assert response.status == 200
                    break
            except OSError:
                assert time.monotonic() < deadline, "the service did not answer in 60 s"
                time.sleep(0.2)
        answer = post(
            url + "/prioritize",
            {
                "task": task("w", 4000, 1),
                "nodes": [
                    node("a", gpus=8, idle_gpus=8, cpu=96000, idle_cpu=96000, model="V100M16"),
                    node("b", gpus=8, idle_gpus=1, cpu=96000, idle_cpu=12000, model="V100M16"),
                ],
            },
        )
    finally:
        service.terminate()
        service.wait(timeout=10)
    assert answer["errorMessage"] == ""
    # FGD fills the node whose last GPU a typical pod could not use anyway
    assert answer["nodeScore"]["b"] > answer["nodeScore"]["a"]
