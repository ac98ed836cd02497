"""What the act-side tests hand the controller's act step: a Runtime on given clients, and a
preemption of one pending pod. The tests of act.preempt against OPA alone and against the real
operators (tests/localfleet/test_operator_preemption.py) build them the same way."""

from __future__ import annotations

import io
from typing import Any, cast

from controller.act.events import EventRecorder
from controller.act.opa import Opa
from controller.act.runtime import Runtime
from controller.config import FleetView, Settings
from controller.decide.preempt import NodeOption, Preemption
from controller.observe.model import Pod
from controller.summary import Summary


def act_runtime(
    kube: Any, opa: Opa, fleet: FleetView, *, opa_url: str, now: float, dry_run: bool = False
) -> Runtime:
    """The act step's runtime on `kube` and `opa`, its lines kept in a StringIO (`rt.out`);
    Prometheus is never asked by the act step."""
    return Runtime(
        kube=kube,
        opa=opa,
        fleet=fleet,
        settings=Settings(prometheus_url="http://unused", opa_url=opa_url, dry_run=dry_run),
        now=now,
        summary=Summary(dry_run=dry_run),
        events=EventRecorder(kube, dry_run=dry_run),
        out=io.StringIO(),
    )


def a_preemption(
    preemptor: Pod,
    *options: NodeOption,
    pending_seconds: float,
    team: str = "research",
    priority: int = 5000,
) -> Preemption:
    """`preemptor`, a pending pod of `team` at `priority`, asking for its whole demand, with
    the node options the decide step found for it."""
    return Preemption(
        preemptor=preemptor,
        priority=priority,
        team=team,
        pending_seconds=pending_seconds,
        demand=dict(preemptor.demand),
        options=options,
    )


def printed(rt: Runtime) -> str:
    """What the act step wrote to the runtime `act_runtime` made (its lines, `would ...` under
    --dry-run)."""
    return cast(io.StringIO, rt.out).getvalue()
