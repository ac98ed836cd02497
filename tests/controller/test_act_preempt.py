"""act.preempt against the real OPA (policies + the builders' configuration document), under
--dry-run so no cluster is needed: how the victims of one selection are put to the policy."""

from __future__ import annotations

from typing import Any

import pytest

from controller.act.opa import Decision, Opa
from controller.act.preempt import _evict, act_on_preemption
from controller.decide.preempt import Candidate, NodeOption, PreemptPlan
from controller.errors import PermanentError
from controller.observe.kube import KubeClient
from localfleet.servers import OpaServer
from tests.controller.act_kit import a_preemption, act_runtime, printed
from tests.controller.builders import NOW, a_pod, config_document, fleet

pytestmark = pytest.mark.integration


class Recording(Opa):
    """The real OPA client, keeping every preempt input it sent."""

    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.asked: list[tuple[str, dict[str, int]]] = []

    def decide(self, name: str, input: dict[str, Any]) -> Decision:
        victim = input["victim"]
        self.asked.append((victim["pod"]["metadata"]["name"], dict(victim["team_usage"])))
        return super().decide(name, input)


def candidate(name: str, gpus: int, since: float) -> Candidate:
    pod = a_pod(name).in_ns("analytics").type("batch").gpus(gpus).priority(100).on("n1").build()
    return Candidate(
        pod=pod,
        priority=100,
        team="analytics",
        frees={"nvidia.com/gpu": gpus},
        running_seconds=7200,
        seconds_since_checkpoint=since,
    )


def run_dry(opa_server: OpaServer, victims: list[Candidate], analytics_holds: int) -> Any:
    """Act on a plan that takes `victims` (the plan itself is not asked: this is the act side's
    own check), analytics holding `analytics_holds` GPUs in all."""
    opa_server.put_data("fleetplane/config", config_document())
    opa_server.put_data("fleetplane/spend", {})
    preemptor = a_pod("big").type("training").gpus(4).priority(5000).pending(NOW - 1200).build()
    need = {"nvidia.com/gpu": sum(v.devices for v in victims)}
    option = NodeOption(node="n1", need=need, candidates=tuple(victims), victims=tuple(victims))
    plan = PreemptPlan(preemptions=[a_preemption(preemptor, option, pending_seconds=1200)])
    held = [v.pod for v in victims]
    rest = analytics_holds - sum(v.devices for v in victims)
    if rest:
        held.append(a_pod("rest").in_ns("analytics").type("batch").gpus(rest).on("n2").build())
    opa = Recording(opa_server.url)
    kube = KubeClient.__new__(KubeClient)  # never called under --dry-run
    rt = act_runtime(kube, opa, fleet(), opa_url=opa_server.url, now=NOW, dry_run=True)
    act_on_preemption(rt, plan, held)
    return opa.asked, printed(rt)


def test_victims_of_one_team_are_judged_with_the_usage_left_after_those_before(
    opa_server: OpaServer,
) -> None:
    # analytics (guaranteed 2) holds 6: a1 is judged with 6, a2 with the 4 left after a1.
    asked, out = run_dry(opa_server, [candidate("a1", 2, 60), candidate("a2", 2, 120)], 6)
    assert asked == [("a1", {"nvidia.com/gpu": 6}), ("a2", {"nvidia.com/gpu": 4})]
    assert out.count("would evict analytics/") == 2


def test_two_victims_together_never_take_their_team_below_its_guarantee(
    opa_server: OpaServer,
) -> None:
    # analytics (guaranteed 2) holds only a1 and a2: each alone may go, both together may not.
    asked, out = run_dry(opa_server, [candidate("a1", 2, 60), candidate("a2", 2, 120)], 4)
    assert "would evict" not in out
    assert ("a2", {"nvidia.com/gpu": 4}) not in asked


class RefusingKube:
    """A kube client whose evictions fail with a 403; merge patches are recorded."""

    def __init__(self) -> None:
        self.patches: list[dict[str, Any]] = []

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        self.patches.append(patch)
        return patch

    def evict(self, namespace: str, name: str, *, uid: str, grace_seconds: int | None) -> None:
        raise PermanentError(f"POST {namespace}/{name}/eviction: HTTP 403: forbidden")


def test_an_eviction_that_fails_otherwise_takes_the_annotation_back() -> None:
    victim = candidate("a1", 2, 60)
    preemptor = a_pod("big").type("training").gpus(2).priority(5000).pending(NOW - 1200).build()
    preemption = a_preemption(preemptor, pending_seconds=1200)
    option = NodeOption(
        node="n1", need={"nvidia.com/gpu": 2}, candidates=(victim,), victims=(victim,)
    )
    kube: Any = RefusingKube()
    rt = act_runtime(kube, Opa("http://unused"), fleet(), opa_url="http://unused", now=NOW)
    with pytest.raises(PermanentError):
        _evict(rt, preemption, option, victim, None)
    assert [p["metadata"]["uid"] for p in kube.patches] == [victim.pod.uid] * 2
    put, taken_back = (p["metadata"]["annotations"] for p in kube.patches)
    assert put["fleetplane.dev/preempted-by"] == "ml-research/big"
    assert taken_back == dict.fromkeys(put)
