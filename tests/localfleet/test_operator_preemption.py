"""Preemption takes an operator's workload whole through its own API, with the real operators,
Volcano, kube-scheduler and OPA running (issue 30 item 4): a victim that is a TrainJob's pod
suspends the TrainJob (the Trainer then suspends its JobSet, whose Jobs end their pods), a
LeaderWorkerSet's pod scales the LeaderWorkerSet to zero; nothing is evicted, the pods end and
do not come back. The act side is the controller's own (`act.preempt.act_on_preemption`): the
project's preempt policy asked for the victim, the stop written on the top object, the Events.
Under --dry-run the line names the top object (the TrainJob, not the JobSet its pods name)."""

from __future__ import annotations

import io
import time
from dataclasses import replace
from typing import Any

import pytest

from controller.act.events import EventRecorder
from controller.act.preempt import act_on_preemption
from controller.act.runtime import Runtime
from controller.decide.preempt import Candidate, NodeOption, PreemptPlan
from controller.observe.model import Pod, pod_from_api
from controller.summary import Summary
from tests.controller.act_kit import a_preemption, printed
from tests.controller.builders import a_pod
from tests.localfleet.operator_kit import (
    NS,
    TRAINING,
    Stops,
    delete,
    gone_and_stays,
    leaderworkerset,
    placed,
    reasons_on,
    trainjob,
)
from tests.localfleet.test_volcano import name

pytestmark = pytest.mark.integration


def preempt(rt: Runtime, pods: list[dict[str, Any]]) -> PreemptPlan:
    """Act on a plan that takes the first pod as the victim, the others as its gang (as the
    decide step groups an operator's workload), for a pending higher-priority training pod."""
    rt.now = time.time()
    rt.settings = replace(rt.settings, eviction_grace_seconds=0)
    victims: list[Pod] = [pod_from_api(p) for p in pods]
    victim = Candidate(
        pod=victims[0],
        priority=0,
        team="research",
        frees=dict(victims[0].demand),
        running_seconds=7200,
        seconds_since_checkpoint=60,
        mates=tuple(victims[1:]),
        mates_devices=sum(sum(p.demand.values()) for p in victims[1:]),
    )
    preemptor = (
        a_pod(name("urgent"))
        .in_ns(NS)
        .type("training")
        .gpus(1)
        .priority(5000)
        .pending(rt.now - 600)
        .build()
    )
    node = victims[0].node_name or ""
    option = NodeOption(
        node=node, need=dict(victims[0].demand), candidates=(victim,), victims=(victim,)
    )
    plan = PreemptPlan(preemptions=[a_preemption(preemptor, option, pending_seconds=600)])
    act_on_preemption(rt, plan, victims)
    return plan


def dry(rt: Runtime) -> Runtime:
    """The same runtime under --dry-run: reads only, its lines in `out`."""
    return replace(
        rt,
        settings=replace(rt.settings, dry_run=True),
        out=io.StringIO(),
        summary=Summary(),
        events=EventRecorder(rt.kube, dry_run=True),
    )


def test_a_preempted_trainjob_is_suspended_whole_not_evicted(
    stops: Stops,
) -> None:
    cluster = stops.cluster
    app = name("tj")
    cluster.apply([trainjob(app, labels=TRAINING)])
    try:
        selector = f"jobset.sigs.k8s.io/jobset-name={app}"
        pods = placed(cluster, selector, 2)
        # --dry-run names the object that would be stopped: the TrainJob above the JobSet
        looked = dry(stops.rt)
        preempt(looked, pods)
        out = printed(looked)
        assert f"would stop (suspend) TrainJob {NS}/{app}:" in out, out
        assert "evict" not in out, out
        assert cluster.get_json("trainjob", app, "-n", NS)["spec"].get("suspend") is not True

        preempt(stops.rt, pods)
        got = cluster.get_json("trainjob", app, "-n", NS)
        assert got["spec"]["suspend"] is True
        assert "preempted on" in got["metadata"]["annotations"]["fleetplane.dev/reclaim-reason"]
        gone_and_stays(cluster, selector)
        assert cluster.get_json("trainjob", app, "-n", NS)["spec"]["suspend"] is True
        assert "Preempted" in reasons_on(cluster, "TrainJob", app)
        # the workload was stopped once, and no pod evicted
        done = stops.rt.summary
        assert done.get("actions", concern="preempt", action="stop", outcome="done") == 1
        assert done.get("actions", concern="preempt", action="evict", outcome="done") == 0
    finally:
        delete(cluster, "trainjob", app)


def test_a_preempted_leaderworkerset_is_scaled_to_zero(
    stops: Stops,
) -> None:
    cluster = stops.cluster
    app = name("lws")
    lws = leaderworkerset(app, 2, labels=TRAINING)
    cluster.apply([lws])
    try:
        pods = placed(cluster, f"app={app}", 2)
        looked = dry(stops.rt)
        preempt(looked, pods)
        out = printed(looked)
        assert f"would stop (scale-to-zero) LeaderWorkerSet {NS}/{app}:" in out, out

        preempt(stops.rt, pods)
        got = cluster.get_json("leaderworkerset", app, "-n", NS)
        assert got["spec"]["replicas"] == 0
        assert got["metadata"]["annotations"]["fleetplane.dev/reclaimed-replicas"] == "1"
        gone_and_stays(cluster, f"app={app}")
        assert cluster.get_json("leaderworkerset", app, "-n", NS)["spec"]["replicas"] == 0
        assert "Preempted" in reasons_on(cluster, "LeaderWorkerSet", app)
    finally:
        delete(cluster, "leaderworkerset", app)
