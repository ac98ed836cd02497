"""One upgrade pass, the status report, and clearing a failed node: the library entry points
the command line and the tests call.

A pass is lease → observe → plan → act. It takes its own Lease (`<lease_name>-upgrade`), so an
upgrade pass and a reconcile pass may run side by side but two upgrade passes never do; under
`--dry-run` it takes no Lease and writes nothing (OPA is still asked, to show its answer).
"""

from __future__ import annotations

import getpass
import socket
import sys
import time
from collections.abc import Callable
from typing import TextIO

from controller.act.events import EventRecorder
from controller.act.opa import Opa
from controller.act.runtime import Runtime
from controller.config import FleetView, Settings
from controller.errors import (
    ControllerError,
    InjectedFault,
    LeaseHeldError,
    NotFoundError,
    PermanentError,
    TemporaryError,
    error_kind,
)
from controller.lease import Lease, held
from controller.log import Log
from controller.observe.kube import KubeClient
from controller.pass_result import PassOutcome
from controller.summary import Summary
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
    log = log or Log()
    out = out or sys.stdout
    summary = Summary(dry_run=settings.dry_run)
    result = PassResult(summary=summary, acted=ActReport())
    opa = Opa(
        settings.opa_url,
        ca_file=settings.opa_ca_file,
        token_file=settings.opa_token_file,
        timeout=settings.request_timeout_seconds,
    )
    lease = (
        None
        if settings.dry_run
        else Lease(
            kube,
            namespace=settings.lease_namespace,
            name=settings.lease_name + LEASE_SUFFIX,
            seconds=settings.lease_seconds,
            log=log,
        )
    )
    before = kube.requests_made
    log.info("upgrade.pass.start", dry_run=settings.dry_run, pools=sorted(upgrade.pools))
    try:
        with held(lease):
            snapshot = take_upgrade_snapshot(kube, upgrade, log=log)
            if after_observe is not None:
                after_observe(snapshot)
            clock = time.time() if now is None else now
            plan = plan_pass(snapshot, upgrade, clock)
            result.plan = plan
            rt = Runtime(
                kube=kube,
                opa=opa,
                fleet=fleet,
                settings=settings,
                now=clock,
                summary=summary,
                log=log,
                out=out,
                after_action=after_write,
            )
            result.acted = act_on_plan(rt, plan)
            for report in plan.pools.values():
                summary.set("upgrade_nodes", report.nodes, pool=report.name)
                for state, count in report.states.items():
                    summary.set("upgrade_states", count, pool=report.name, state=state)
                summary.set("upgrade_halted", 1 if report.halted else 0, pool=report.name)
    except LeaseHeldError as error:
        result.skipped = summary.skipped = str(error)
        log.info("upgrade.pass.skipped", reason=str(error))
    except InjectedFault:
        raise
    except ControllerError as error:
        kind = error_kind(error)
        summary.error(CONCERN, kind)
        result.error = str(error)
        log.error("upgrade.pass.failed", error=str(error), kind=kind)
    finally:
        opa.close()
    summary.finish(kube.requests_made - before)
    log.info("upgrade.pass.summary", **summary.as_dict())
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
