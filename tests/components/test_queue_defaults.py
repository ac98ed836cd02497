"""QueueDefaults: a team's plain manifest (naming no queue) is given the team's Volcano queue at
admission, before the gate judges it, and runs in that queue; a wrong queue is still refused.

The integration tests run the real API server (MutatingAdmissionPolicy, served as
admissionregistration.k8s.io/v1 without flags), the real gate (the project's policies in OPA
behind the rendered webhook) and the real Volcano."""

from __future__ import annotations

from components.queue_defaults import queue_defaults_manifests, team_queues
from fleet.config import FleetConfig

QUEUE = "scheduling.volcano.sh/queue-name"


def test_one_policy_and_binding_per_shape_for_the_team_namespaces(
    stack_fleets: dict[str, FleetConfig],
) -> None:
    fleet = stack_fleets["dev"]
    manifests = queue_defaults_manifests(fleet)
    kinds = [(m["kind"], m["metadata"]["name"]) for m in manifests]
    assert len(kinds) == 6
    queues = team_queues(fleet)
    assert queues["serving-canary"] == "serving"
    for m in manifests:
        if m["kind"] == "MutatingAdmissionPolicyBinding":
            (expression,) = m["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
            assert expression["values"] == sorted(queues)
            assert fleet.system_namespace not in expression["values"]
        else:
            assert m["spec"]["failurePolicy"] == "Fail"
