"""`data.fleetplane.claims`: what each DRA claim and claim template of a judged namespace asks
for, so the gate judges a pod that uses one with what it holds.

A pod names its claims (spec.resourceClaims) and holds none of their content, so the gate reads
the ResourceClaimSpec of each from this document (policies/fleetplane/admission/dra_claims.rego);
a pod whose claim has no record yet is refused and retried. The spec is immutable once
written, so a record is true for the object's life. docs/contracts.md has the shape.
"""

from __future__ import annotations

from typing import Any

from controller.observe.dra_claims import ClaimObject


def claim_records(
    claims: list[ClaimObject], system_namespaces: frozenset[str]
) -> dict[str, dict[str, dict[str, Any]]]:
    """namespace -> record key ("resourceclaims/<name>", "resourceclaimtemplates/<name>") ->
    the ResourceClaimSpec, for the claims and templates outside `system_namespaces` (the gate
    does not judge those)."""
    records: dict[str, dict[str, dict[str, Any]]] = {}
    for claim in sorted(claims, key=lambda c: (c.namespace, c.record_key)):
        if claim.namespace in system_namespaces:
            continue
        records.setdefault(claim.namespace, {})[claim.record_key] = claim.spec
    return records
