"""One upgrade pass, the status report, and clearing a failed node: the library entry points
the command line and the tests call.

A pass is lease → observe → plan → act. It takes its own Lease (`<lease_name>-upgrade`), so an
upgrade pass and a reconcile pass may run side by side but two upgrade passes never do; under
`--dry-run` it takes no Lease and writes nothing (OPA is still asked, to show its answer).
"""

from __future__ import annotations

import getpass
import socket
import time
from collections.abc import Callable
from typing import TextIO

from controller.act.events import EventRecorder
from controller.config import FleetView, Settings
from controller.errors import NotFoundError, PermanentError, TemporaryError
from controller.harness import PassHarness
from controller.log import Log
from controller.observe.kube import KubeClient
from controller.pass_result import PassOutcome
from controller.upgrade.act import ActReport, act_on_plan, node_path, node_ref, write_state
from controller.upgrade.handlers import clear_step
from controller.upgrade.observe import UpgradeSnapshot, node_view, take_upgrade_snapshot
from controller.upgrade.plan import Plan, plan_pass
from controller.upgrade.settings import UpgradeSettings

LEASE_SUFFIX = "-upgrade"
CONCERN = "upgrade"


PassResult = PassOutcome[Plan, ActReport]


def run_upgrade_pass(
    *,
    kube: KubeClient,
    fleet: FleetView,
    settings: Settings,
    upgrade: UpgradeSettings,
    now: float | None = None,
    after_write: Callable[[str], None] | None = None,
    after_observe: Callable[[UpgradeSnapshot], None] | None = None,
    out: TextIO | None = None,
    log: Log | None = None,
) -> PassResult:
    """One pass. `now` replaces the clock for every decision (tests, replays); `after_write` is
    called after every write with its name (a test raises `InjectedFault` there to kill the
    run half way)."""
    harness = PassHarness(
        kube=kube,
        fleet=fleet,
        settings=settings,
        events="upgrade.pass",
        failure_concern=CONCERN,
        lease_suffix=LEASE_SUFFIX,
        out=out,
        log=log,
    )
    summary = harness.summary
    result = PassResult(summary=summary, acted=ActReport())
    harness.log.info("upgrade.pass.start", dry_run=settings.dry_run, pools=sorted(upgrade.pools))

    def body() -> None:
        snapshot = take_upgrade_snapshot(kube, upgrade, log=harness.log)
        if after_observe is not None:
            after_observe(snapshot)
        clock = time.time() if now is None else now
        plan = plan_pass(snapshot, upgrade, clock)
        result.plan = plan
        result.acted = act_on_plan(harness.runtime(clock, after_action=after_write), plan)
        for report in plan.pools.values():
            summary.set("upgrade_nodes", report.nodes, pool=report.name)
            for state, count in report.states.items():
                summary.set("upgrade_states", count, pool=report.name, state=state)
            summary.set("upgrade_halted", 1 if report.halted else 0, pool=report.name)

    harness.run(body)
    result.skipped, result.error = harness.skipped, harness.error
    harness.finish()
    return result


def upgrade_status(
    kube: KubeClient, upgrade: UpgradeSettings, *, now: float | None = None, log: Log | None = None
) -> Plan:
    """The plan a pass would make now: per-pool progress and what blocks it. Read-only."""
    snapshot = take_upgrade_snapshot(kube, upgrade, log=log)
    return plan_pass(snapshot, upgrade, time.time() if now is None else now)


def operator_identity() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = "unknown"
    return f"{user}@{socket.gethostname()}"


def clear_failure(
    kube: KubeClient,
    upgrade: UpgradeSettings,
    node: str,
    *,
    now: float | None = None,
    actor: str | None = None,
    dry_run: bool = False,
    log: Log | None = None,
) -> str:
    """Clear a failed node (the operator's explicit action): it goes back to validation, or
    through the upgrade again when it does not run the target. Returns what was done; raises
    `PermanentError` when the node is not failed or not in a rolled pool."""
    log = log or Log()
    clock = time.time() if now is None else now
    actor = actor or operator_identity()
    try:
        view = node_view(kube.get(node_path(node)))
    except NotFoundError as error:
        raise PermanentError(f"node {node} not found") from error
    pool = upgrade.pools.get(view.pool)
    if pool is None:
        raise PermanentError(f"node {node} is in pool {view.pool!r}, which is not rolled")
    step = clear_step(
        view, pool.driver_version, clock, how="fleetplane controller upgrade clear", actor=actor
    )
    if step is None:
        raise PermanentError(
            f"node {node} is not failed (state {view.state or 'none'}): nothing to clear"
        )
    if dry_run:
        return f"would clear node {node}: {view.state} -> {step.next_state}: {step.reason}"
    events = EventRecorder(kube, dry_run=False, log=log)
    written = write_state(
        kube, step, clock, resource_version=view.resource_version, log=log, events=events
    )
    if written is None:
        raise TemporaryError(f"node {node} changed state meanwhile; read it again")
    log.warning(
        "upgrade.failure.cleared",
        node=node,
        by=actor,
        failure=(view.detail.failure or {}).get("reason"),
        to_state=written,
    )
    events.emit(
        node_ref(node),
        "DriverUpgradeFailureCleared",
        f"failure cleared by {actor}: {(view.detail.failure or {}).get('reason')}",
        warning=True,
    )
    return f"cleared node {node}: {step.reason} (now {written})"
