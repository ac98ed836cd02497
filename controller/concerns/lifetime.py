"""The lifetime concern's step: orphaned and failed work, then work past its maximum runtime,
then gang stragglers (decide.orphans, maxruntime, stragglers; act.orphans, maxruntime,
stragglers)."""

from __future__ import annotations

from controller.act.maxruntime import act_on_runtime
from controller.act.orphans import act_on_orphans
from controller.act.runtime import Runtime
from controller.act.stragglers import act_on_stragglers
from controller.concerns import PassView
from controller.decide.maxruntime import plan_runtime
from controller.decide.orphans import plan_orphans
from controller.decide.stragglers import (
    Utilisation,
    expected_samples,
    needs_evidence,
    plan_stragglers,
)
from controller.decide.workloads import gang_of
from controller.errors import ControllerError
from controller.observe.metrics import Prometheus
from controller.observe.model import Pod
from controller.observe.owners import read_owners
from controller.remediation.signals import pod_utilisation


def run(view: PassView) -> set[str]:
    """On the snapshot's pods and their owners (read now, after the pods); pods the concerns
    before it removed in this pass are left out, and so is what an earlier step of the concern
    ended (a gang with a member ended is not judged for stragglers: its peers are no longer all
    there)."""
    rt, snapshot, freed = view.rt, view.snapshot, view.freed
    pods = [pod for pod in snapshot.pods if pod.uid not in freed]
    owners = read_owners(rt.kube, pods, log=rt.log, workers=max(1, rt.settings.act_concurrency))
    rules = rt.fleet.lifetime
    ended = act_on_orphans(rt, plan_orphans(pods, owners, rt.now, rules))
    pods = [pod for pod in pods if pod.uid not in ended]
    ended |= act_on_runtime(rt, plan_runtime(pods, rt.fleet, owners, rt.now, rules))
    gone = {gang_of(pod) for pod in snapshot.pods if pod.uid in ended or pod.uid in freed}
    pods = [
        pod
        for pod in pods
        if pod.uid not in ended and (gang_of(pod) is None or gang_of(pod) not in gone)
    ]
    return ended | _stragglers(rt, pods, view.prometheus)


def _stragglers(rt: Runtime, pods: list[Pod], prometheus: Prometheus) -> set[str]:
    """Read the gangs' utilisation (only when a gang has two running members) and judge them;
    without evidence every member is unknown: nothing is reported or restarted."""
    rules = rt.fleet.lifetime
    evidence: dict[tuple[str, str], Utilisation] = {}
    if needs_evidence(pods):
        try:
            found = pod_utilisation(prometheus, rt.now, rules.straggler_window_seconds)
        except ControllerError as error:
            rt.report(
                "lifetime",
                "lifetime.straggler.metrics-unavailable",
                error,
                consequence="no evidence: no straggler is reported or restarted in this pass",
            )
        else:
            evidence = {
                key: Utilisation(peak_percent=peak, mean_percent=mean, samples=samples)
                for key, (peak, mean, samples) in found.items()
            }
    expected = expected_samples(
        rules.straggler_window_seconds,
        rt.settings.scrape_interval_seconds,
        rt.settings.min_sample_coverage,
    )
    return act_on_stragglers(rt, plan_stragglers(pods, evidence, rt.now, rules, expected))
