"""The images' SBOMs (CycloneDX JSON), each written beside its OCI layout.

controller: the Python components are what `cyclonedx-py environment` finds installed in the
    image's site-packages (read from the built tree, not from the lock file, so that a test can
    compare the two); the Debian packages are added from the root filesystem's
    `var/lib/dpkg/status.d`.
opa: the Go modules linked into the OPA binary, read from the build information the Go linker
    writes into it (`images/gobuildinfo.py`, what `go version -m` prints), and the Debian package
    of the C library the image carries when the binary links it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from images import gobuildinfo, oci, rootfs

SPEC_VERSION = "1.6"


def _cyclonedx() -> str:
    beside = Path(sys.executable).parent / "cyclonedx-py"
    found = str(beside) if beside.exists() else shutil.which("cyclonedx-py")
    if found is None:
        raise RuntimeError("cyclonedx-py not found: `pip install cyclonedx-bom` (a dev extra)")
    return found


def python_components(site: Path, pyproject: Path) -> dict[str, Any]:
    """`cyclonedx-py environment` over exactly `site` (an interpreter that sees nothing else)."""
    with tempfile.TemporaryDirectory() as tmp:
        interpreter = Path(tmp) / "python"
        # -S: no site module, so sys.path is PYTHONPATH and the standard library only.
        interpreter.write_text(f'#!/bin/sh\nPYTHONPATH="{site}" exec "{sys.executable}" -S "$@"\n')
        interpreter.chmod(0o755)
        env = {k: v for k, v in os.environ.items() if k != "SOURCE_DATE_EPOCH"}
        env.pop("VIRTUAL_ENV", None)
        result = subprocess.run(
            [
                _cyclonedx(),
                "environment",
                "--output-reproducible",
                "--pyproject",
                str(pyproject),
                "--mc-type",
                "application",
                "-o",
                "-",
                str(interpreter),
            ],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    if result.returncode != 0:
        raise RuntimeError(f"cyclonedx-py failed: {result.stderr[-2000:]}")
    return json.loads(result.stdout)


def write_sbom(
    path: Path, *, site: Path, debian: dict[str, str], image: oci.Image, project: Path
) -> dict[str, Any]:
    bom = python_components(site, project / "pyproject.toml")
    bom.setdefault("components", []).extend(debian_component(n, v) for n, v in debian.items())
    metadata = bom.setdefault("metadata", {})
    metadata.setdefault("properties", []).extend(
        [
            {"name": "fleetplane:image:digest", "value": image.digest},
            {"name": "fleetplane:rootfs:suite", "value": rootfs.SUITE},
        ]
    )
    path.write_text(json.dumps(bom, indent=2, sort_keys=True) + "\n")
    return bom


def debian_component(name: str, version: str) -> dict[str, Any]:
    """A Debian package of the images' root filesystem, as an SBOM component."""
    return {
        "type": "library",
        "bom-ref": f"pkg:deb/debian/{name}@{version}",
        "name": name,
        "version": version,
        "purl": f"pkg:deb/debian/{name}@{version}?arch=amd64&distro=debian-12",
        "properties": [{"name": "fleetplane:source", "value": "debian"}],
    }


def go_purl(module: gobuildinfo.Module) -> str:
    from packageurl import PackageURL

    namespace, _, name = module.path.rpartition("/")
    return str(
        PackageURL(type="golang", namespace=namespace or None, name=name, version=module.version)
    )


def go_component(module: gobuildinfo.Module, kind: str = "library") -> dict[str, Any]:
    """A Go module linked into a binary: the replacement when the build replaced it (that is the
    code linked), with the go.sum hash the linker recorded."""
    linked = module.replaced_by or module
    properties = [{"name": "fleetplane:source", "value": "go build information"}]
    if linked.sum:
        properties.append({"name": "fleetplane:go:sum", "value": linked.sum})
    if module.replaced_by is not None:
        properties.append(
            {"name": "fleetplane:go:replaces", "value": f"{module.path}@{module.version}"}
        )
    purl = go_purl(linked)
    return {
        "type": kind,
        "bom-ref": purl,
        "name": linked.path,
        "version": linked.version,
        "purl": purl,
        "properties": properties,
    }


def opa_bom(
    info: gobuildinfo.BuildInfo, *, debian: dict[str, str], image: oci.Image
) -> dict[str, Any]:
    """The OPA image's SBOM: OPA's main module as the subject, every module its build
    information lists, and the Debian packages the image carries (the C library, when linked)."""
    if info.main is None:
        raise ValueError(f"{info.path or 'the binary'}: no main module in its build information")
    subject = go_component(info.main, kind="application")
    libraries = [go_component(dep) for dep in sorted(info.deps, key=lambda m: m.path)]
    libraries += [debian_component(n, v) for n, v in sorted(debian.items())]
    properties = [
        {"name": "fleetplane:image:digest", "value": image.digest},
        {"name": "fleetplane:go:version", "value": info.go_version},
        *(
            {"name": f"fleetplane:go:build:{key}", "value": value}
            for key, value in sorted(info.settings.items())
        ),
    ]
    if debian:
        properties.append({"name": "fleetplane:rootfs:suite", "value": rootfs.SUITE})
    return {
        "$schema": f"http://cyclonedx.org/schema/bom-{SPEC_VERSION}.schema.json",
        "bomFormat": "CycloneDX",
        "specVersion": SPEC_VERSION,
        "version": 1,
        "metadata": {"component": subject, "properties": properties},
        "components": libraries,
        "dependencies": [
            {"ref": subject["bom-ref"], "dependsOn": [c["bom-ref"] for c in libraries]},
            *({"ref": c["bom-ref"]} for c in libraries),
        ],
    }


def write_opa_sbom(
    path: Path, *, binary: bytes, debian: dict[str, str], image: oci.Image
) -> dict[str, Any]:
    """`opa_bom` of the binary the image holds, written to `path`."""
    bom = opa_bom(gobuildinfo.read(binary), debian=debian, image=image)
    path.write_text(json.dumps(bom, indent=2, sort_keys=True) + "\n")
    return bom


def go_modules(bom: dict[str, Any]) -> dict[str, str]:
    """{module path: version} of the SBOM's Go components (purl type golang)."""
    return {
        component["name"]: component["version"]
        for component in bom.get("components", [])
        if component.get("purl", "").startswith("pkg:golang/")
    }


def python_packages(bom: dict[str, Any]) -> dict[str, str]:
    """{normalised name: version} of the SBOM's Python components (purl type pypi)."""
    found: dict[str, str] = {}
    for component in bom.get("components", []):
        purl = component.get("purl", "")
        if purl.startswith("pkg:pypi/"):
            found[normalise(component["name"])] = component["version"]
    return found


def normalise(name: str) -> str:
    import re

    return re.sub(r"[-_.]+", "-", name).lower()
