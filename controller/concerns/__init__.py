"""The reconcile pass's concerns, one registry entry each, in the order the pass runs them.

An entry names its concern, says what it does (the command line's help is made of these), the
configuration it reads, the decide and act modules it uses, and its step: the function that
decides on the pass's snapshot and acts, `step(view: PassView) -> set[str] | None` (the uids of
the pods it removed, which the concerns after it treat as already freed). The step's module is
imported only when the pass runs it: importing this registry (the command line does) loads
nothing of the controller.

A new concern is its decide module, its act module, its policy, its step module here and one
entry below (plus its configuration section); `reconcile.py` and `cli.py` need no change.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from controller.act.runtime import Runtime
    from controller.config import FleetView
    from controller.observe.metrics import Prometheus
    from controller.observe.snapshot import Snapshot


@dataclass(frozen=True, kw_only=True)
class PassView:
    """What a concern's step is given: the act runtime, the pass's snapshot, its Prometheus,
    what the concern's prefetch found (None without one) and the uids of the pods the concerns
    before it removed in this pass."""

    rt: Runtime
    snapshot: Snapshot
    prometheus: Prometheus
    found: Any = None
    freed: frozenset[str] = frozenset()


Step = Callable[[PassView], "set[str] | None"]
Prefetch = Callable[["FleetView", "Prometheus", float], Any]


@dataclass(frozen=True, kw_only=True)
class Concern:
    """name: the concern (its command, its `concern` label, its log events' prefix).
    description: the command's help. phrase: what the full pass's help calls it. settings:
    the sections of `data.fleetplane.config` it reads. decide, act: the modules its step uses
    (a test holds them to the step's imports). step, prefetch: "module:function"; prefetch, if
    any, is called with (fleet, prometheus, now) while the snapshot is taken, and its result is
    the step's `view.found`."""

    name: str
    description: str
    phrase: str
    settings: tuple[str, ...]
    decide: tuple[str, ...]
    act: tuple[str, ...]
    step: str
    prefetch: str | None = None

    def load_step(self) -> Step:
        step: Step = _load(self.step)
        return step

    def load_prefetch(self) -> Prefetch | None:
        return None if self.prefetch is None else _load(self.prefetch)


def _load(reference: str) -> Any:
    module, _, name = reference.partition(":")
    return getattr(importlib.import_module(module), name)


REGISTRY: tuple[Concern, ...] = (
    Concern(
        name="idle",
        description="Warn idle accelerator workloads, clear warnings of busy ones, reclaim "
        "after the grace period.",
        phrase="idle reclamation",
        settings=("workload_types.<type>.idle", "controller.scrape_interval_seconds"),
        decide=("controller.decide.idle",),
        act=("controller.act.idle",),
        step="controller.concerns.idle:run",
        prefetch="controller.concerns.idle:evidence",
    ),
    Concern(
        name="lifetime",
        description="Warn and stop work past its workload type's maximum runtime (after its "
        "next checkpoint, gangs whole).",
        phrase="work lifetimes",
        settings=("lifetime", "workload_types.<type>.default_max_runtime_seconds"),
        decide=(
            "controller.decide.maxruntime",
            "controller.decide.orphans",
            "controller.decide.stragglers",
            "controller.decide.workloads",
        ),
        act=("controller.act.maxruntime", "controller.act.orphans", "controller.act.stragglers"),
        step="controller.concerns.lifetime:run",
    ),
    Concern(
        name="spend",
        description="Compute month-to-date accelerator spend per team, keep the accumulator, "
        "publish it to OPA.",
        phrase="spend accounting",
        settings=("teams", "models"),
        decide=("controller.decide.spend",),
        act=("controller.act.spend",),
        step="controller.concerns.spend:run",
    ),
    Concern(
        name="admission",
        description="Publish to OPA the workload records, reservations and approval bindings "
        "the gate reads.",
        phrase="the gate's admission data",
        settings=("teams", "system_namespaces", "data.fleetplane.approvals"),
        decide=(
            "controller.decide.approvals",
            "controller.decide.claim_records",
            "controller.decide.lineage",
            "controller.decide.records",
            "controller.decide.reservations",
        ),
        act=(
            "controller.act.admission_data",
            "controller.act.claim_data",
            "controller.act.opa_files",
        ),
        step="controller.concerns.admission:run",
    ),
    Concern(
        name="fairshare",
        description="Take back from teams above their Volcano queue's deserved share for "
        "teams under theirs with work waiting (least work lost first, gangs whole).",
        phrase="fair share",
        settings=("teams", "workload_types", "controller.preemption_pending_seconds"),
        decide=("controller.decide.fairshare",),
        act=("controller.act.fairshare",),
        step="controller.concerns.fairshare:run",
    ),
    Concern(
        name="preempt",
        description="Evict the least-work-lost victims for workloads kept waiting by "
        "lower-priority work.",
        phrase="priority preemption",
        settings=("workload_types", "teams", "controller.preemption_pending_seconds"),
        decide=("controller.decide.preempt",),
        act=("controller.act.preempt",),
        step="controller.concerns.preempt:run",
    ),
    Concern(
        name="fragmentation",
        description="Measure each pool's GPU fragmentation (free accelerators the fleet's "
        "typical pods cannot use) and export it.",
        phrase="GPU fragmentation",
        settings=("models", "observability.fragmented_gpus_alert_share"),
        decide=("controller.decide.fragmentation",),
        act=("controller.act.fragmentation",),
        step="controller.concerns.fragmentation:run",
    ),
    Concern(
        name="disruption",
        description="Set karpenter.sh/do-not-disrupt on running accelerator pods an autoscaler "
        "would lose protected work on (stale checkpoint, split gang, minimum runtime); clear "
        "the ones the controller set when the reason is gone.",
        phrase="autoscaler disruption marks",
        settings=(
            "upgrade.checkpoint_max_age_seconds",
            "workload_types.<type>.min_runtime_seconds",
        ),
        decide=("controller.decide.disruption", "controller.decide.disruption_memo"),
        act=("controller.act.disruption", "controller.act.disruption_memo"),
        step="controller.concerns.disruption:run",
    ),
    Concern(
        name="burst",
        description="Let a team's waiting accelerator work onto the next capacity tier "
        "(on-demand after its reservation, then spot) when the policy allows it; close the "
        "tier when nothing waits or runs there.",
        phrase="bursting",
        settings=("pools", "teams", "models", "controller.preemption_pending_seconds"),
        decide=("controller.decide.burst",),
        act=("controller.act.burst",),
        step="controller.concerns.burst:run",
    ),
)

CONCERNS: tuple[str, ...] = tuple(concern.name for concern in REGISTRY)
"""The concerns' names, in the pass's order."""


def concern(name: str) -> Concern:
    """The registry entry of `name` (KeyError when there is none)."""
    for entry in REGISTRY:
        if entry.name == name:
            return entry
    raise KeyError(name)


def full_pass_description() -> str:
    """The help of `reconcile`, the full pass: every concern, in order."""
    phrases = [entry.phrase for entry in REGISTRY]
    return f"One full pass: {', '.join(phrases[:-1])}, then {phrases[-1]}."
