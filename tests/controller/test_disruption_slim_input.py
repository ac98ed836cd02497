"""The disruption policy answers the slim input (the pod's metadata only, controller.decide.
disruption.facts) exactly as it answered the whole Pod manifest the controller sent before: the
real OPA with the project's policies and the local stack's configuration, one pod for each of
the policy's rules and branches (minimum runtime, stale, fresh and missing checkpoints, gangs,
an unknown workload type), batched as the concern asks."""

from __future__ import annotations

from typing import Any

import pytest

from controller.act.opa import Opa
from controller.decide.disruption import facts
from controller.observe.model import Pod
from fleet.config import load_stack_config
from fleet.project import stack_file
from fleet.render import render_opa_data
from localfleet.servers import OpaServer
from tests.controller.builders import NOW, a_pod

pytestmark = pytest.mark.integration

GANG = "scheduling.k8s.io/group-name"
LOCATION = "fleetplane.dev/checkpoint-location"


def pods() -> list[Pod]:
    """A pod per branch; the local stack: training's minimum runtime 20 s, checkpoints older
    than 900 s stale."""

    def training(name: str, started: float = NOW - 7200) -> Any:
        return a_pod(name).type("training").gpus(1).on("gpu-1", started=started)

    return [
        training("short", started=NOW - 5).build(),
        training("stale").checkpoint(NOW - 5000).build(),
        training("fresh").checkpoint(NOW - 60).build(),
        training("declared-never").annotate(LOCATION, "s3://ckpt/x").build(),
        training("future").checkpoint(NOW + 600).build(),
        training("plain").of_deployment("serve").build(),
        a_pod("serving").type("inference").gpus(1).on("gpu-2").build(),
        a_pod("untyped").gpus(1).on("gpu-2").build(),
        a_pod("unknown").type("no-such-type").gpus(1).on("gpu-2").build(),
        training("gang-a").annotate(GANG, "pg").checkpoint(NOW - 60).build(),
        training("gang-b").annotate(GANG, "pg").checkpoint(NOW - 2000).build(),
        training("mates-a").annotate(GANG, "fresh").checkpoint(NOW - 30).build(),
        training("mates-b").annotate(GANG, "fresh").checkpoint(NOW - 90).build(),
        training("alone").annotate(GANG, "solo").build(),
    ]


def test_the_slim_input_answers_as_the_whole_pod_did(opa_server: OpaServer) -> None:
    opa_server.put_data(
        "fleetplane/config", render_opa_data(load_stack_config(stack_file("local")))
    )
    judged = facts(pods(), NOW)
    slim = {pod.name: one for pod, one in judged}
    whole = {pod.name: {**one, "pod": pod.manifest()} for pod, one in judged}
    assert all(set(one["pod"]) == {"metadata"} for one in slim.values())
    assert all({"spec", "status"} <= set(one["pod"]) for one in whole.values())
    opa = Opa(opa_server.url)
    try:
        slim_answers = opa.decide_each("disruption", slim)
        whole_answers = opa.decide_each("disruption", whole)
    finally:
        opa.close()
    assert set(slim_answers) == set(slim)
    assert slim_answers == whole_answers
    # the set reaches every branch: allowed, each protection, and a malformed input
    allowed = {name for name, answer in slim_answers.items() if answer.allow}
    assert allowed == {"fresh", "plain", "serving", "mates-a", "mates-b", "alone"}
    told = " ".join(slim_answers[name].because() for name in slim_answers)
    for phrase in ("minimum runtime", "never recorded", "member of gang", "known workload type"):
        assert phrase in told
