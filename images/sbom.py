"""The controller image's SBOM (CycloneDX JSON), written beside its OCI layout.

The Python components are what `cyclonedx-py environment` finds installed in the image's
site-packages (read from the built tree, not from the lock file, so that a test can compare the
two); the Debian packages are added from the root filesystem's `var/lib/dpkg/status.d`.
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

from images import oci, rootfs


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
    for name, version in debian.items():
        bom.setdefault("components", []).append(
            {
                "type": "library",
                "bom-ref": f"pkg:deb/debian/{name}@{version}",
                "name": name,
                "version": version,
                "purl": f"pkg:deb/debian/{name}@{version}?arch=amd64&distro=debian-12",
                "properties": [{"name": "fleetplane:source", "value": "debian"}],
            }
        )
    metadata = bom.setdefault("metadata", {})
    metadata.setdefault("properties", []).extend(
        [
            {"name": "fleetplane:image:digest", "value": image.digest},
            {"name": "fleetplane:rootfs:suite", "value": rootfs.SUITE},
        ]
    )
    path.write_text(json.dumps(bom, indent=2, sort_keys=True) + "\n")
    return bom


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
