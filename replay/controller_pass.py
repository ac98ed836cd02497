"""The controller's pass inside the replay: the controller's own decision code on a snapshot of
the simulated fleet, OPA for every side effect, and the effects applied to the simulation.

Deciding is the controller's code, called as `controller.reconcile` calls it:
`decide.idle.plan_idle`, `decide.spend.plan_spend`, `decide.preempt.plan_preemption` (with
`select_victims` and `opa_input`). Only the side effects are the replay's own, because here
they change the simulation instead of the Kubernetes API; they follow `controller.act`:

- idle (`act.idle`): a warning writes `idle-warned-at` and `reclaim-deadline` on the pod; a
  busy pod's warning is cleared; a workload is reclaimed only when OPA allows every one of its
  pods (`fleetplane/decisions/reclaim`), all asked in one batch together with the admission
  reviews of the period (neither depends on the other's answers);
- spend (`act.spend`): each team's accumulator is kept for the next pass and the month-to-date
  spend is published as `data.fleetplane.spend` (read by the admission gate);
- preempt (`act.preempt`): for each planned preemption, on its best node first, every victim of
  the selection is put to OPA (`fleetplane/decisions/preempt`, one batch per selection); a
  denied victim is replaced by the next one in comparator order (`select_victims`), and the
  next node is tried only while nothing was evicted for this preemptor.

The DCGM evidence the idle decision reads is derived from each pod's utilisation profile: every
scrape of the window is present (the scrape interval of the configuration), the peak
utilisation of the window is the profile's, the graphics-engine activity follows utilisation,
and GPU memory holds steady.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from controller.act.opa import Decision
from controller.decide.idle import EvidenceRules, IdlePlan, plan_idle
from controller.decide.preempt import (
    AnswerKey,
    NodeOption,
    Preemption,
    Quota,
    asked_usages,
    opa_input,
    plan_preemption,
    release,
)
from controller.decide.preempt import select_victims as choose_victims
from controller.decide.spend import Accumulator, Rate, plan_spend
from controller.decide.workloads import team_usage
from controller.observe.metrics import GpuSeries, PodEvidence
from controller.observe.model import Namespace, Node, Pod
from fleet import labels as keys
from replay.fleet import FleetState
from replay.objects import Job
from replay.opa import BatchClient


class Controller:
    """The controller of one replay's fleet, with the state it keeps between passes (the spend
    accumulators that live on team namespaces in a cluster, and the spend document it
    publishes for the admission gate)."""

    def __init__(self, fleet: FleetState, policy: BatchClient) -> None:
        self.simulated = fleet
        self.policy = policy
        scenario = fleet.scenario
        self.fleet = scenario.view
        self.concerns = scenario.concerns
        self.rules = EvidenceRules(scrape_interval_seconds=scenario.scrape_interval_seconds)
        self.priorities = scenario.priorities
        self.namespaces = {
            ns: Namespace(
                name=ns,
                uid=f"namespace-{ns}",
                resource_version="1",
                labels={keys.TEAM: team},
                annotations={},
            )
            for ns, team in self.fleet.namespaces.items()
        }
        self.accumulators: dict[str, Accumulator | None] = dict.fromkeys(self.fleet.teams)
        self.spend_document: dict[str, Any] = {}
        """The month-to-date spend last published (`data.fleetplane.spend`)."""
        self._evidence_cache: dict[str, tuple[float, str, PodEvidence]] = {}
        self._rates: dict[str, Rate | None] = {}
        """What each node charges (`decide.spend.node_rate`), kept across passes: a node's
        name is never reused and its labels never change."""
        self.passes = 0
        self.seconds = 0.0

    def priority_of(self, pod: Pod) -> int:
        if pod.priority or not pod.priority_class:
            return pod.priority
        return self.priorities.get(pod.priority_class, 0)

    def run_pass(
        self, at: float, admit: Callable[[list[dict[str, Any]], list[str]], list[Decision]]
    ) -> None:
        """One pass at trace time `at`. `admit(reclaim_inputs, reclaiming)` is called once,
        after the spend document is published: it reviews the period's submissions and
        answers the reclaim decisions in the same OPA query, returning the latter;
        `reclaiming` holds the uids of the pods those decisions are about."""
        began = time.perf_counter()
        sim = self.simulated
        now = sim.epoch + at
        pods = [g.view for g in sim.ghosts]
        pods += [j.view(at, sim.epoch) for j in sim.pending.values()]
        pods += [j.view(at, sim.epoch) for j in sim.running.values()]
        nodes = sim.ready_views()
        plan: IdlePlan | None = None
        if "idle" in self.concerns:
            plan = self._idle_plan(pods, at, now)
        if "spend" in self.concerns:
            self._spend(pods, nodes, now)
        # The reclaim questions go to OPA with the period's admission reviews, which read the
        # spend just published: neither set of answers depends on the other.
        inputs = self._reclaim_inputs(plan, now) if plan is not None else []
        reclaiming = (
            [j.pod.uid for item in plan.reclaim for j in item.pods] if plan is not None else []
        )
        asked = time.perf_counter()
        decisions = admit(inputs, reclaiming)
        began += time.perf_counter() - asked  # the admission batch is not the controller's time
        freed = self._reclaim(plan, decisions, at) if plan is not None else set()
        if "preempt" in self.concerns:
            self._preempt(pods, nodes, at, now, freed)
        if self.concerns:
            self.passes += 1
        self.seconds += time.perf_counter() - began

    # ------------------------------------------------------------------ idle

    def _evidence(self, at: float) -> dict[int, dict[tuple[str, str], PodEvidence]]:
        sim = self.simulated
        scrape = self.rules.scrape_interval_seconds
        evidence: dict[int, dict[tuple[str, str], PodEvidence]] = {}
        for job in sim.running.values():
            wt = self.fleet.workload_types.get(job.workload_type)
            if wt is None or wt.idle is None or job.run_start is None or job.node is None:
                continue
            window = wt.idle.window_seconds
            if at - job.run_start < window:
                continue  # judged NO_EVIDENCE before evidence is read
            progress = job.progress_at(at)
            peak = job.workload.profile.max_between(progress - window, progress)
            host = job.node.name
            cached = self._evidence_cache.get(job.uid)
            if cached is not None and cached[0] == peak and cached[1] == host:
                found = cached[2]
            else:
                found = self._pod_evidence(job, window, peak, host, int(window // scrape))
                self._evidence_cache[job.uid] = (peak, host, found)
            evidence.setdefault(window, {})[(job.namespace, job.name)] = found
        return evidence

    @staticmethod
    def _pod_evidence(job: Job, window: int, peak: float, host: str, samples: int) -> PodEvidence:
        memory = job.workload.fb_used_mib
        return PodEvidence(
            window_seconds=window,
            gpus={
                (host, str(i)): GpuSeries(
                    hostname=host,
                    gpu=str(i),
                    util_samples=samples,
                    max_util_percent=peak,
                    max_engine_active=peak / 100.0,
                    fb_samples=samples,
                    max_fb_used_mib=memory,
                    min_fb_used_mib=memory,
                )
                for i in range(job.gpus)
            },
        )

    def _idle_plan(self, pods: list[Pod], at: float, now: float) -> IdlePlan:
        """Judge every pod; write and clear warnings (`act.idle.warn`, `clear_warning`)."""
        sim = self.simulated
        plan = plan_idle(pods, self.fleet, self._evidence(at), now, self.rules)
        if not plan.clear and not plan.warn:
            return plan
        by_uid = {job.uid: job for job in sim.running.values()}
        counted = sim.in_window(at)
        for judgement in plan.clear:
            job = by_uid.get(judgement.pod.uid)
            if job is not None:
                job.annotations.pop(keys.IDLE_WARNED_AT, None)
                job.annotations.pop(keys.RECLAIM_DEADLINE, None)
                job.invalidate()
                sim.counters.idle_warnings_cleared += 1 if counted else 0
        for judgement in plan.warn:
            job = by_uid.get(judgement.pod.uid)
            if job is not None and judgement.rule is not None:
                warned_at = int(now)
                job.annotations[keys.IDLE_WARNED_AT] = str(warned_at)
                job.annotations[keys.RECLAIM_DEADLINE] = str(
                    warned_at + judgement.rule.grace_seconds
                )
                job.invalidate()
                sim.counters.idle_warnings += 1 if counted else 0
        return plan

    @staticmethod
    def _reclaim_inputs(plan: IdlePlan, now: float) -> list[dict[str, Any]]:
        """The reclaim decision input of every pod of every workload to reclaim
        (`act.idle.reclaim`)."""
        inputs: list[dict[str, Any]] = []
        for item in plan.reclaim:
            for judgement in item.pods:
                assert judgement.facts is not None
                inputs.append(
                    {
                        "pod": judgement.pod.manifest(),
                        "workload_type": judgement.pod.workload_type,
                        "idle": judgement.facts.opa_input(warned_at=judgement.warned_at, now=now),
                    }
                )
        return inputs

    def _reclaim(self, plan: IdlePlan, answers: list[Decision], at: float) -> set[str]:
        """Reclaim each workload whose every pod OPA allowed; the uids freed."""
        sim = self.simulated
        if not plan.reclaim:
            return set()
        by_uid = {job.uid: job for job in sim.running.values()}
        counted = sim.in_window(at)
        decisions = iter(answers)
        freed: set[str] = set()
        for item in plan.reclaim:
            answers = [next(decisions) for _ in item.pods]
            if not all(d.allow for d in answers):
                sim.counters.reclaims_denied += 1 if counted else 0
                continue
            for judgement in item.pods:
                job = by_uid[judgement.pod.uid]
                freed.add(judgement.pod.uid)
                sim.reclaim(job, at)
        return freed

    # ------------------------------------------------------------------ spend

    def _spend(self, pods: list[Pod], nodes: dict[str, Node], now: float) -> None:
        plan = plan_spend(
            pods, nodes, self.namespaces, self.fleet, self.accumulators, now, rates=self._rates
        )
        for team, spend in plan.teams.items():
            if plan.home.get(team) is not None:
                self.accumulators[team] = spend.accumulator
        self.spend_document = {
            team: spend.opa_record(now) for team, spend in sorted(plan.teams.items())
        }

    # ------------------------------------------------------------------ preempt

    def _preempt(
        self, pods: list[Pod], nodes: dict[str, Node], at: float, now: float, freed: set[str]
    ) -> None:
        sim = self.simulated
        plan = plan_preemption(
            pods,
            nodes,
            [],
            self.fleet,
            self.priority_of,
            now,
            pending_seconds=sim.scenario.preemption_pending_seconds,
            freeing=frozenset(freed),
        )
        if not plan.preemptions:
            return
        usage = team_usage(pods, self.fleet, freeing=freed)
        by_uid = {job.uid: job for job in sim.running.values()}
        for preemption in plan.preemptions:
            answers: dict[AnswerKey, Decision] = {}
            for option in preemption.options:
                outcome = self._on_node(preemption, option, usage, answers, by_uid, at, now)
                if outcome is not None:
                    break

    def _on_node(
        self,
        preemption: Preemption,
        option: NodeOption,
        usage: dict[str, dict[str, int]],
        answers: dict[AnswerKey, Decision],
        by_uid: dict[str, Job],
        at: float,
        now: float,
    ) -> bool | None:
        """As `act.preempt._on_node`: True when the node was made to fit, None when nothing
        was evicted (another node may be tried), False when it stopped half way."""
        sim = self.simulated
        excluded: set[str] = set()
        evicted: list[Any] = []
        while True:
            freed: dict[str, int] = {}
            for victim in evicted:
                for resource, n in victim.frees.items():
                    freed[resource] = freed.get(resource, 0) + n
            need = {res: n - freed.get(res, 0) for res, n in option.need.items()}
            if all(n <= 0 for n in need.values()):
                if evicted and sim.in_window(at):
                    sim.counters.preemptors_served += 1
                return True
            remaining = [
                c for c in option.candidates if c.pod.uid not in excluded and c not in evicted
            ]
            quota = Quota.of(self.fleet, usage, preemption.team)
            victims = choose_victims(remaining, need, quota)
            if victims is None:
                return False if evicted else None
            # As `act.preempt._on_node`: each victim is judged with its team's usage reduced by
            # the victims before it; an answer is reused only for the same usage.
            asked = asked_usages(victims, quota)
            ask = [(v, held, key) for v, held, key in asked if key not in answers]
            if ask:
                decided = self.policy.evaluate(
                    preempt=[opa_input(preemption, v, self.fleet, held, now) for v, held, _ in ask]
                ).preempt
                for (_, _, key), d in zip(ask, decided, strict=True):
                    answers[key] = d
            denied = False
            for victim, _, key in asked:
                if not answers[key].allow:
                    excluded.add(victim.pod.uid)
                    denied = True
                    if sim.in_window(at):
                        sim.counters.preemptions_denied += 1
                    break
            if denied:
                continue
            for victim in victims:
                job = by_uid.get(victim.pod.uid)
                if job is not None and job.node is not None and job.uid == victim.pod.uid:
                    sim.evict(job, at)
                elif sim.in_window(at):
                    # As `act.preempt._evict`: a victim that is gone has freed its devices.
                    sim.counters.victims_already_gone += 1
                evicted.append(victim)
                release(usage, victim)
