"""Publish the DRA claim records (`data.fleetplane.claims`) to every OPA replica.

Written like the workload records (controller/act/admission_data.py): what changed, every pass
of the admission concern and of its keeper between passes. Not kept in a ConfigMap for OPA's
start: a restarted replica refuses pods that use claims (no record) until the next keeper
pass writes them again, which fails closed and costs a retry.
"""

from __future__ import annotations

from typing import Any

from controller.act.opa_documents import publish_records
from controller.act.runtime import Runtime

CONCERN = "admission"
CLAIMS_PATH = "fleetplane/claims"


def act_on_claim_records(rt: Runtime, records: dict[str, dict[str, dict[str, Any]]]) -> None:
    publish_records(rt, CONCERN, CLAIMS_PATH, records, "DRA claims and templates")
