"""Empty data documents at the first level of every policy package under `data.fleetplane`,
loaded with the configuration, so that a data write costs OPA what it writes.

On every write through its Data API (PUT or PATCH, any size) OPA checks that no rule's path
holds data (`ast.CheckPathConflicts` with `storage.NonEmpty`): for each rule it reads the rule's
path and then each parent up to the first one that exists, and its in-memory store deep-copies
what it reads. A rule such as `data.fleetplane.admission.deny` found no data at
`data.fleetplane.admission`, so the check read `data.fleetplane`, all of it: the configuration
and every document the controller keeps (the reservations and workload records of the whole
fleet), once per rule. At 20,000 reservations one write, even a one-operation PATCH, cost OPA
10-17 CPU-seconds; at 50,000 pods a pass's writes cost it ~40 (issue 31). With an empty object
at `data.fleetplane.admission` (and at each other package's first level) the walk stops there,
on an empty object, and a write costs OPA 0.01 CPU-s at any fleet size.

An empty object there changes no decision: it merges with the package's rules, and no rule
reads a package as a base document.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

ROOT = "fleetplane"
_PACKAGE = re.compile(r"^package\s+([A-Za-z0-9_.]+)", re.MULTILINE)


def package_anchors(sources: Iterable[str]) -> dict[str, dict[str, object]]:
    """{first: {}} for the first path segment under `data.fleetplane` of every package the
    Rego `sources` declare (`package fleetplane.decisions.reclaim` -> "decisions")."""
    anchors: dict[str, dict[str, object]] = {}
    for source in sources:
        for name in _PACKAGE.findall(source):
            parts = name.split(".")
            if len(parts) > 1 and parts[0] == ROOT:
                anchors[parts[1]] = {}
    return dict(sorted(anchors.items()))
