"""The AdmissionReview corpus: every case of tests/policies/cases.py as a file in the corpus
that ships with policy review (policyreview/corpus/reviews).

    FLEETPLANE_UPDATE_CORPUS=1 pytest tests/policies/test_contracts.py -k corpus   # rewrite it

Each file is the AdmissionReview the API server would send, with the case name as its uid,
so a policy diff can name the request that changed. A test keeps the files in step with the
table.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from policyreview.diff import DEFAULT_CORPUS as REVIEWS
from policyreview.diff import DEFAULT_WORKLOADS
from tests.policies.cases import CASES
from tests.policies.lifetime_cases import CORPUS_WORKLOADS


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def reviews() -> dict[str, dict[str, Any]]:
    """File name -> AdmissionReview, for every case."""
    return {f"{slug(name)}.json": workload.review(uid=slug(name)) for name, workload, _ in CASES}


def render(review: dict[str, Any]) -> str:
    return json.dumps(review, indent=2, sort_keys=True) + "\n"


def write(directory: Path = REVIEWS) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    wanted = reviews()
    for stale in directory.glob("*.json"):
        if stale.name not in wanted:
            stale.unlink()
    for name, review in wanted.items():
        (directory / name).write_text(render(review))
    if directory == REVIEWS:
        DEFAULT_WORKLOADS.write_text(render(CORPUS_WORKLOADS))
