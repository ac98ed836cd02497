"""The digest of a JSON document: sha256 of its text with keys sorted, so equal documents give
equal digests. What rolls a Deployment whose pods read a document only at start
(`components/kube.py` CONFIG_HASH_ANNOTATION) and names the gate's revision (fleet/opa_data.py)."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def config_digest(document: Any) -> str:
    """The sha256 (hex) of `document` as JSON with sorted keys."""
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()
