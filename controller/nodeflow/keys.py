"""Label and annotation keys every node workflow shares: those of the validator pod and the
gang annotation Volcano writes."""

from __future__ import annotations

from typing import Final

APP_NAME_LABEL: Final = "app.kubernetes.io/name"
VALIDATOR_APP: Final = "fleetplane-upgrade-validator"
"""`app.kubernetes.io/name` of the upgrade's validator pods (their role is `validator`)."""
VALIDATOR_NODE_ANNOTATION: Final = "fleetplane.dev/upgrade-node"
VALIDATOR_ATTEMPT_LABEL: Final = "fleetplane.dev/upgrade-attempt"

GANG_ANNOTATION: Final = "scheduling.k8s.io/group-name"
"""The PodGroup a pod belongs to, as Volcano annotates the pods it schedules: Volcano runs a
gang's pods together or not at all, so draining one node of a gang stops all of it, and the
pods of one gang leave together."""
