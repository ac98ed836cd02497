"""The Pushgateway's image, built like OPA's: the pinned binary (Debian's
`prometheus-pushgateway`, tools/bin/pushgateway, the one the local fleet runs), the loader and
C library it links from the images' Debian root filesystem, a passwd naming `nobody` (65534, the
user the Deployment runs as), one layer, no shell. Reproducible like the others, so the digest
`fleetplane image build` prints is what `observability.pushgateway.image` names.

Its SBOM (OUT/pushgateway.cdx.json) names the Debian package the binary came from, with the
version and revision the binary reports (`pushgateway --version`: Debian builds it outside Go
modules, so its build information lists no modules), its Go toolchain, and libc6.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from images import build, oci, rootfs, sbom

UID = 65534
PACKAGE = "prometheus-pushgateway"
PORT = 9091


def find_pushgateway(explicit: Path | None = None) -> Path:
    """`explicit`, else the checkout's pinned tools/bin/pushgateway, else the PATH."""
    import os

    if explicit:
        return explicit
    pinned = (
        Path(os.environ.get("FLEETPLANE_BIN_DIR") or build.PROJECT / "tools" / "bin")
        / "pushgateway"
    )
    if pinned.exists():
        return pinned
    found = shutil.which("pushgateway") or shutil.which("prometheus-pushgateway")
    if found is None:
        raise build.BuildError("no pushgateway binary: `make tools`, or pass --pushgateway PATH")
    return Path(found)


def reported_version(binary: Path) -> tuple[str, str, str]:
    """(upstream version, Debian revision, Go version) from `pushgateway --version`, e.g.
    `pushgateway, version 1.5.1 (branch: debian/sid, revision: 1.5.1-2+b5)`."""
    text = subprocess.run([str(binary), "--version"], capture_output=True, text=True, check=False)
    said = text.stdout + text.stderr
    version = re.search(r"version (\S+)", said)
    revision = re.search(r"revision: ([^)\s]+)", said)
    go = re.search(r"go version:\s+(\S+)", said)
    if not version:
        raise build.BuildError(f"{binary} --version did not say its version: {said[:300]!r}")
    return (
        version.group(1),
        revision.group(1) if revision else version.group(1),
        go.group(1) if go else "",
    )


def pushgateway_bom(
    *, package_version: str, go_version: str, debian: dict[str, str], image: oci.Image
) -> dict[str, Any]:
    subject = {**sbom.debian_component(PACKAGE, package_version), "type": "application"}
    libraries = [sbom.debian_component(n, v) for n, v in sorted(debian.items())]
    properties = [
        {"name": "fleetplane:image:digest", "value": image.digest},
        {"name": "fleetplane:rootfs:suite", "value": rootfs.SUITE},
    ]
    if go_version:
        properties.append({"name": "fleetplane:go:version", "value": go_version})
    return {
        "$schema": f"http://cyclonedx.org/schema/bom-{sbom.SPEC_VERSION}.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": sbom.SPEC_VERSION,
        "version": 1,
        "metadata": {"component": subject, "properties": properties},
        "components": libraries,
        "dependencies": [
            {"ref": subject["bom-ref"], "dependsOn": [c["bom-ref"] for c in libraries]},
            *({"ref": c["bom-ref"]} for c in libraries),
        ],
    }


def build_pushgateway(out: Path, *, binary_path: Path, rootfs_tar: Path) -> build.Built:
    started = time.monotonic()
    version, package_version, go_version = reported_version(binary_path)
    binary = binary_path.resolve().read_bytes()
    entries, contents, debian = build.binary_entries("pushgateway", binary, rootfs_tar)
    entries += build.passwd_entries("nobody", UID)
    shutil.rmtree(out, ignore_errors=True)
    layer = oci.write_layer(out, oci.layer_from_entries(entries), f"pushgateway {version}")
    image = oci.write_image(
        out,
        [layer],
        oci.ImageConfig(
            entrypoint=["/pushgateway"],
            cmd=[],
            user=f"{UID}:{UID}",
            labels={
                "org.opencontainers.image.title": "pushgateway",
                "org.opencontainers.image.version": version,
                "org.opencontainers.image.licenses": "Apache-2.0",
            },
        ),
        ref_name=version,
    )
    sbom_path = out.parent / f"{out.name}.cdx.json"
    bom = pushgateway_bom(
        package_version=package_version, go_version=go_version, debian=debian, image=image
    )
    sbom_path.write_text(json.dumps(bom, indent=2, sort_keys=True) + "\n")
    return build.Built(
        name="pushgateway",
        image=image,
        seconds=time.monotonic() - started,
        sbom=sbom_path,
        contents=contents,
    )
