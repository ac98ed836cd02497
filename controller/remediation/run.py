"""One health pass: Lease -> observe (nodes, pods, DCGM signals) -> classify -> plan -> act.

It takes its own Lease (`<lease_name>-health`), so a health pass may run beside a reconcile or
an upgrade pass but never beside another health pass; under `--dry-run` it takes no Lease and
writes nothing (OPA is still asked, to show its answer). Prometheus down means no evidence:
nodes already out of service still move (their steps need no new evidence: a drain, a
remediation request, a validator), but nothing new is quarantined and no hot node returns.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TextIO

from controller.act.runtime import Runtime
from controller.config import FleetView, Settings
from controller.harness import PassHarness
from controller.log import Log
from controller.nodeflow.act import node_ref
from controller.observe.kube import KubeClient
from controller.observe.metrics import Prometheus
from controller.pass_result import PassOutcome
from controller.remediation.act import ActReport, act_on_plan
from controller.remediation.classify import CONTAINED_ECC, NodeVerdict, Thermal, classify_node
from controller.remediation.observe import HealthSnapshot, take_health_snapshot
from controller.remediation.plan import Plan, plan_pass
from controller.remediation.settings import HealthSettings

LEASE_SUFFIX = "-health"
CONCERN = "health"


PassResult = PassOutcome[Plan, ActReport]


def verdicts_of(snapshot: HealthSnapshot, settings: HealthSettings) -> dict[str, NodeVerdict]:
    out: dict[str, NodeVerdict] = {}
    for node in snapshot.nodes:
        model = node.view.labels.get("nvidia.com/gpu.product", "")
        lines = settings.thermal.get(model)
        thermal = (
            Thermal(hot_c=lines[0], cool_c=lines[1], expected_samples=settings.expected_hot_samples)
            if lines
            else None
        )
        returned = node.detail.history[-1].get("returned") if node.detail.history else None
        out[node.name] = classify_node(
            node.name,
            snapshot.signals.get(node.name),
            expected_gpus=node.view.gpu_capacity,
            thermal=thermal,
            since=float(returned) if returned else None,
        )
    return out


def run_health_pass(
    *,
    kube: KubeClient,
    fleet: FleetView,
    settings: Settings,
    health: HealthSettings,
    now: float | None = None,
    prometheus: Prometheus | None = None,
    after_write: Callable[[str], None] | None = None,
    out: TextIO | None = None,
    log: Log | None = None,
) -> PassResult:
    """One pass. `now` replaces the clock; `after_write` is called after every write (a test
    raises `InjectedFault` there to kill the run half way)."""
    harness = PassHarness(
        kube=kube,
        fleet=fleet,
        settings=settings,
        events="health.pass",
        failure_concern=CONCERN,
        lease_suffix=LEASE_SUFFIX,
        prometheus=True if prometheus is None else prometheus,
        out=out,
        log=log,
    )
    summary, log = harness.summary, harness.log
    result = PassResult(summary=summary, acted=ActReport())
    clock = time.time() if now is None else now
    log.info("health.pass.start", dry_run=settings.dry_run)

    def body() -> None:
        assert harness.prometheus is not None
        snapshot = take_health_snapshot(kube, harness.prometheus, health, now=clock, log=log)
        if snapshot.signals_error:
            summary.error(CONCERN, "observe")
        verdicts = verdicts_of(snapshot, health)
        plan = plan_pass(snapshot, verdicts, health, clock)
        result.plan = plan
        rt = harness.runtime(clock, after_action=after_write)
        _report_findings(rt, plan)
        result.acted = act_on_plan(rt, plan)
        for report in plan.pools.values():
            for state, count in report.states.items():
                summary.set("health_states", count, pool=report.name, state=state)
            summary.set("health_waiting", len(report.waiting), pool=report.name)
        for node, cost in result.acted.returned.items():
            log.info("health.fault.cost", node=node, **cost)
            summary.set(
                "health_gpu_hours_out_of_service",
                cost.get("gpu_hours_out_of_service", 0),
                node=node,
            )
            summary.set(
                "health_gpu_hours_of_work_lost",
                cost.get("gpu_hours_of_work_lost", 0),
                node=node,
            )

    harness.run(body)
    result.skipped, result.error = harness.skipped, harness.error
    harness.finish()
    return result


def _report_findings(rt: Runtime, plan: Plan) -> None:
    """Faults that ask nothing of the node are logged and counted (a contained ECC error is
    also announced on the node: its pod restarts, the node stays)."""
    for name, verdict in plan.verdicts.items():
        for fault in verdict.faults:
            rt.summary.action(CONCERN, f"finding-{fault.kind}", "seen")
            if fault.remedy is None:
                rt.log.info("health.finding", node=name, **fault.as_dict())
            if fault.kind == CONTAINED_ECC and not rt.dry_run:
                rt.events.emit(
                    node_ref(name),
                    "GpuContainedEccError",
                    f"GPU {fault.gpu}: {fault.reason}: the application on it must restart; the node stays in service",
                    warning=True,
                )
