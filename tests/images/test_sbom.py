"""The OPA image's SBOM, from the build information the Go linker writes into the binary: read
without a Go toolchain, written as a CycloneDX document its schema accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator

from images import gobuildinfo, oci, sbom

SENTINEL_START = bytes.fromhex("3077af0c9274080241e1c107e6d618e6")
SENTINEL_END = bytes.fromhex("f932433186182072008242104116d8f2")
MODINFO = (
    "path\tgithub.com/open-policy-agent/opa\n"
    "mod\tgithub.com/open-policy-agent/opa\tv1.22.2\th1:main=\n"
    "dep\tgithub.com/agnivade/levenshtein\tv1.2.1\th1:lev=\n"
    "dep\tgithub.com/cenkalti/backoff/v5\tv5.0.3\th1:backoff=\n"
    "dep\tgolang.org/x/net\tv0.1.0\n"
    "=>\tgithub.com/fork/net\tv0.1.1-fork\th1:fork=\n"
    "build\t-trimpath=true\n"
    "build\tCGO_ENABLED=1\n"
)
IMAGE = oci.Image(
    layout=Path("opa"),
    manifest=oci.Blob("sha256:" + "ab" * 32, 500, "application/vnd.oci.image.manifest.v1+json"),
    config=oci.Blob("sha256:" + "cd" * 32, 300, "application/vnd.oci.image.config.v1+json"),
    layers=(),
)


def varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def go_binary(modinfo: str = MODINFO, *, flags: int = 0x2, version: str = "go1.26.8") -> bytes:
    """The bytes of a program as the Go linker lays out its build information: 16-aligned
    header, then the version and the sentinel-wrapped module information, length-prefixed."""
    header = gobuildinfo.MAGIC + bytes([8, flags])
    header += b"\0" * (gobuildinfo.HEADER_SIZE - len(header))
    wrapped = SENTINEL_START + modinfo.encode() + SENTINEL_END
    body = varint(len(version)) + version.encode() + varint(len(wrapped)) + wrapped
    # a misaligned copy of the magic first (a program that reads build information holds it as
    # a string): only a 16-aligned one is the header
    before = b"\x7fELF" + b"\0" * 12 + b"x" + gobuildinfo.MAGIC
    before += b"\0" * (-len(before) % 16)
    return before + header + body


def test_the_build_information_is_what_go_version_m_prints() -> None:
    info = gobuildinfo.read(go_binary())
    assert info.go_version == "go1.26.8"
    assert info.path == "github.com/open-policy-agent/opa"
    assert info.main == gobuildinfo.Module(
        "github.com/open-policy-agent/opa", "v1.22.2", "h1:main="
    )
    assert [(m.path, m.version, m.sum) for m in info.deps] == [
        ("github.com/agnivade/levenshtein", "v1.2.1", "h1:lev="),
        ("github.com/cenkalti/backoff/v5", "v5.0.3", "h1:backoff="),
        ("golang.org/x/net", "v0.1.0", ""),
    ]
    assert info.deps[2].replaced_by == gobuildinfo.Module(
        "github.com/fork/net", "v0.1.1-fork", "h1:fork="
    )
    assert info.settings == {"-trimpath": "true", "CGO_ENABLED": "1"}


@pytest.mark.parametrize(
    ("data", "error"),
    [
        (b"\x7fELF not a go program", "no Go build information"),
        (go_binary(flags=0), "pre-1.18"),
        (go_binary()[:-40], "truncated"),
    ],
)
def test_what_is_not_go_build_information_is_refused(data: bytes, error: str) -> None:
    with pytest.raises(gobuildinfo.BuildInfoError, match=error):
        gobuildinfo.read(data)


def test_the_opa_sbom_is_valid_cyclonedx_naming_every_linked_module(tmp_path: Path) -> None:
    path = tmp_path / "opa.cdx.json"
    bom = sbom.write_opa_sbom(path, binary=go_binary(), debian={"libc6": "2.36-9"}, image=IMAGE)
    text = path.read_text()
    assert json.loads(text) == bom
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    subject = bom["metadata"]["component"]
    assert subject["type"] == "application"
    assert subject["purl"] == "pkg:golang/github.com/open-policy-agent/opa@v1.22.2"
    # the replacement is what was linked, and says what it replaces
    assert sbom.go_modules(bom) == {
        "github.com/agnivade/levenshtein": "v1.2.1",
        "github.com/cenkalti/backoff/v5": "v5.0.3",
        "github.com/fork/net": "v0.1.1-fork",
    }
    fork = next(c for c in bom["components"] if c["name"] == "github.com/fork/net")
    assert {"name": "fleetplane:go:replaces", "value": "golang.org/x/net@v0.1.0"} in fork[
        "properties"
    ]
    libc = next(c for c in bom["components"] if c["name"] == "libc6")
    assert libc["purl"] == "pkg:deb/debian/libc6@2.36-9?arch=amd64&distro=debian-12"
    properties = {p["name"]: p["value"] for p in bom["metadata"]["properties"]}
    assert properties["fleetplane:image:digest"] == IMAGE.digest
    assert properties["fleetplane:go:version"] == "go1.26.8"
    assert properties["fleetplane:go:build:CGO_ENABLED"] == "1"
    (root,) = [d for d in bom["dependencies"] if d["ref"] == subject["bom-ref"]]
    assert len(root["dependsOn"]) == len(bom["components"]) == 4
