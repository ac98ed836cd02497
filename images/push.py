"""Push an OCI image layout to a registry (the OCI distribution API), keeping its digest.

The manifest is sent as the exact bytes of the layout's blob, so the registry stores it under
the same sha256 and a pod can name the image `REGISTRY/REPO@sha256:...`. Plain HTTP, no
authentication: this is for the local fleet's registry on loopback. A cloud registry is
published to with `skopeo copy --preserve-digests` or `crane push` (README: "Images").
"""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from images import oci


class PushError(RuntimeError):
    """The registry refused or could not be reached; the message says which step."""


def _request(method: str, url: str, *, data: bytes | None = None, headers=None):
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        return urllib.request.urlopen(request, timeout=120)
    except urllib.error.HTTPError as error:
        if method == "HEAD" and error.code == 404:
            return None
        body = error.read().decode(errors="replace")[:500]
        raise PushError(f"{method} {url}: HTTP {error.code} {body}") from None
    except OSError as error:
        raise PushError(f"{method} {url}: {error}") from None


def push(layout: Path, registry: str, repository: str, *, tag: str | None = None) -> str:
    """Push the layout's image to `registry` (host:port) as `repository`; returns the pinned
    reference `registry/repository@sha256:...`. Blobs the registry has are not sent again."""
    image = oci.read_image(layout)
    base = f"http://{registry}/v2/{repository}"
    for blob in [*(layer.blob for layer in image.layers), image.config]:
        if _request("HEAD", f"{base}/blobs/{blob.digest}") is not None:
            continue
        response = _request("POST", f"{base}/blobs/uploads/")
        location = response.headers["Location"]
        upload = urllib.parse.urljoin(f"http://{registry}/", location)
        separator = "&" if "?" in upload else "?"
        _request(
            "PUT",
            f"{upload}{separator}digest={urllib.parse.quote(blob.digest)}",
            data=oci.read_blob(layout, blob.digest),
            headers={"Content-Type": "application/octet-stream"},
        )
    manifest = oci.read_blob(layout, image.digest)
    for reference in [image.digest, *([tag] if tag else [])]:
        response = _request(
            "PUT",
            f"{base}/manifests/{reference}",
            data=manifest,
            headers={"Content-Type": image.manifest.media_type},
        )
        stored = response.headers.get("Docker-Content-Digest")
        if stored and stored != image.digest:
            raise PushError(f"the registry stored the manifest as {stored}, not {image.digest}")
    return f"{registry}/{repository}@{image.digest}"


def manifest_digest(registry: str, repository: str, reference: str) -> str:
    """The digest the registry serves for `reference` (a tag or a digest)."""
    response = _request(
        "HEAD",
        f"http://{registry}/v2/{repository}/manifests/{reference}",
        headers={"Accept": f"{oci.MEDIA_MANIFEST}, {oci.MEDIA_INDEX}"},
    )
    if response is None:
        raise PushError(f"{registry}/{repository}:{reference} not found")
    return str(response.headers["Docker-Content-Digest"])


def catalog(registry: str) -> list[str]:
    response = _request("GET", f"http://{registry}/v2/_catalog")
    return list(json.loads(response.read())["repositories"])
