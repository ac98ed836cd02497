"""One handler per upgrade state (the GPU Operator's upgrade library, ApplyState): each looks at
one node and its pods and returns the `Step` that moves it on, or says what it waits for; and
the operator's way back from a failed node (`clear_step`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.nodeflow.consumers import SERVICE_OWNERS, Role
from controller.nodeflow.validator import HEALTHY, UNHEALTHY, read_verdict, validator_pod
from controller.observe.model import DisruptionBudget, format_time
from controller.upgrade import states
from controller.upgrade.observe import (
    NodeView,
    PodView,
    checkpoint_at,
    pdb_blocking,
)
from controller.upgrade.settings import UpgradeSettings
from controller.upgrade.steps import (
    Action,
    Cordon,
    CreateValidator,
    DeleteValidator,
    Evict,
    RestartDriver,
    Step,
    Uncordon,
)


@dataclass(frozen=True, kw_only=True)
class Context:
    settings: UpgradeSettings
    target: str
    now: float
    pdbs: list[DisruptionBudget]


def _gpu_workloads(pods: list[PodView]) -> list[PodView]:
    return [p for p in pods if p.role is Role.WORKLOAD and p.gpu and p.active]


def _evict(pod: PodView, why: str, ctx: Context) -> Evict:
    budget = pdb_blocking(ctx.pdbs, pod)
    return Evict(pod=pod, why=why, budget=f"{budget.namespace}/{budget.name}" if budget else None)


def _names(pods: list[PodView], limit: int = 5) -> str:
    shown = ", ".join(p.key for p in pods[:limit])
    return shown + (f" and {len(pods) - limit} more" if len(pods) > limit else "")


def driver_restarted(node: NodeView, pods: list[PodView]) -> bool:
    """A node in `driver-restart-required` whose recorded driver pod is gone was restarted by an
    interrupted pass: it runs (or is loading) the new driver and must be validated."""
    if node.state != states.DRIVER_RESTART_REQUIRED or node.detail.driver_pod is None:
        return False
    return all(p.uid != node.detail.driver_pod for p in _driver_pods(pods))


def on_no_state(node: NodeView, pods: list[PodView], ctx: Context) -> Step | None:
    """No label. Removed by an operator from a failed node: that is a clear. Removed from a node
    the rollout had cordoned: it goes back through validation (or the upgrade) before it takes
    work again. Otherwise marking (step 4 of `plan_pool`) decides."""
    if node.detail.failure:
        return clear_step(node, ctx.target, ctx.now, how="state label removed", actor=None)
    if node.detail.cordoned and node.unschedulable:
        at_target = node.driver == ctx.target
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.VALIDATION_REQUIRED if at_target else states.CORDON_REQUIRED,
            detail=node.detail.but(
                attempt=node.detail.attempt + 1 if at_target else node.detail.attempt,
                target=ctx.target,
            ),
            reason="the state label was removed while the rollout had the node cordoned: "
            + ("validating it before it takes work" if at_target else "upgrading it again"),
        )
    return None


def on_upgrade_required(node: NodeView, pods: list[PodView], ctx: Context) -> Step | None:
    if node.driver == ctx.target:
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.UPGRADE_DONE,
            detail=node.detail,
            reason=f"already runs {ctx.target}: nothing to do",
        )
    return None  # admission (step 3 of `plan_pool`)


def on_cordon_required(node: NodeView, pods: list[PodView], ctx: Context) -> Step:
    return Step(
        node=node,
        target=ctx.target,
        next_state=states.WAIT_FOR_JOBS_REQUIRED,
        actions=() if node.unschedulable else (Cordon(),),
        reason="cordoned: no new pod is scheduled here",
    )


def _evictable_now(pod: PodView, ctx: Context) -> str | None:
    if pod.owner_kind in SERVICE_OWNERS:
        return f"replica of a {pod.owner_kind}, started again elsewhere"
    # A malformed or future annotation is no checkpoint: never evict on it (observe logs it).
    checkpoint = checkpoint_at(pod, ctx.now)
    if checkpoint is not None:
        age = ctx.now - checkpoint
        if age <= ctx.settings.checkpoint_max_age_seconds:
            return f"checkpointed {int(age)}s ago"
    return None


def on_wait_for_jobs(node: NodeView, pods: list[PodView], ctx: Context) -> Step:
    timeout = ctx.settings.wait_for_jobs_timeout_seconds
    since = node.since if node.since is not None else ctx.now
    deadline = since + timeout
    consumers = _gpu_workloads(pods)
    if not consumers:
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.DRAIN_REQUIRED,
            reason="no pod on the node uses the GPU",
        )
    if ctx.now >= deadline:
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.DRAIN_REQUIRED,
            reason=f"waited {timeout}s: {len(consumers)} pod(s) still use the GPU and are "
            f"evicted: {_names(consumers)}",
        )
    jobs = [p for p in consumers if not p.deleting and _evictable_now(p, ctx) is None]
    evictions = tuple(
        _evict(p, why, ctx)
        for p in consumers
        if not p.deleting and (why := _evictable_now(p, ctx)) is not None
    )
    if not jobs:
        # Evicted here already, so that the drain usually finds the node empty; an eviction a
        # budget refuses keeps the node here until the next pass.
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.DRAIN_REQUIRED,
            actions=evictions,
            reason="every pod left using the GPU is a service replica or checkpointed recently",
        )
    return Step(
        node=node,
        target=ctx.target,
        actions=evictions,
        stamp=node.since is None,
        reason=f"waiting until {format_time(deadline)} for {len(jobs)} job pod(s) to finish or "
        f"checkpoint: {_names(jobs)}",
    )


def _driver_pods(pods: list[PodView]) -> list[PodView]:
    return sorted(
        (p for p in pods if p.role is Role.DRIVER and p.active and not p.deleting),
        key=lambda p: p.name,
    )


def on_drain(node: NodeView, pods: list[PodView], ctx: Context) -> Step:
    consumers = _gpu_workloads(pods)
    if not consumers:
        drivers = _driver_pods(pods)
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.DRIVER_RESTART_REQUIRED,
            detail=node.detail.but(driver_pod=drivers[0].uid if drivers else None),
            reason="every pod that used the GPU is gone",
        )
    evictions = tuple(_evict(p, f"uses the GPU: {p.gpu}", ctx) for p in consumers if not p.deleting)
    if evictions:
        return Step(
            node=node,
            target=ctx.target,
            actions=evictions,
            reason=f"evicting {len(evictions)} pod(s) that use the GPU",
        )
    return Step(
        node=node,
        target=ctx.target,
        reason=f"waiting for {len(consumers)} evicted pod(s) to terminate: {_names(consumers)}",
    )


def on_driver_restart(node: NodeView, pods: list[PodView], ctx: Context) -> Step:
    blockers = [
        p
        for p in pods
        if p.gpu and p.active and p.role in (Role.WORKLOAD, Role.DAEMONSET, Role.STATIC)
    ]
    if blockers:
        kinds = {p.role for p in blockers}
        hint = (
            ": DaemonSet and static pods are never evicted; stop them on this node, or run "
            "them in the GPU Operator's namespace so they restart with the driver"
            if kinds & {Role.DAEMONSET, Role.STATIC}
            else ""
        )
        return Step(
            node=node,
            target=ctx.target,
            actions=tuple(
                _evict(p, f"uses the GPU: {p.gpu}", ctx)
                for p in blockers
                if p.role is Role.WORKLOAD and not p.deleting
            ),
            reason=f"driver not restarted: {len(blockers)} pod(s) still use the GPU: "
            f"{_names(blockers)}{hint}",
        )
    drivers = _driver_pods(pods)
    recorded = node.detail.driver_pod
    if recorded is None:
        if not drivers:
            return Step(
                node=node,
                target=ctx.target,
                reason=f"no driver pod on the node (namespace {ctx.settings.driver_namespace}, "
                f"selector {ctx.settings.driver_selector})",
            )
        # Record which pod to restart before restarting it, so a run killed right after the
        # delete never restarts the replacement too.
        return Step(
            node=node,
            target=ctx.target,
            detail=node.detail.but(driver_pod=drivers[0].uid),
            reason=f"driver pod to restart: {drivers[0].key}",
        )
    following = node.detail.but(attempt=node.detail.attempt + 1)
    for pod in drivers:
        if pod.uid == recorded:
            return Step(
                node=node,
                target=ctx.target,
                next_state=states.VALIDATION_REQUIRED,
                actions=(RestartDriver(pod=pod),),
                detail=following,
                reason=f"restarting driver pod {pod.key} so that its DaemonSet rolls in "
                f"{ctx.target}",
            )
    return Step(
        node=node,
        target=ctx.target,
        next_state=states.VALIDATION_REQUIRED,
        detail=following,
        reason="the driver pod was already restarted",
    )


def on_validation(node: NodeView, pods: list[PodView], ctx: Context) -> Step:
    detail = node.detail
    timeout = ctx.settings.validation_timeout_seconds
    since = node.since if node.since is not None else ctx.now
    timed_out = ctx.now >= since + timeout
    stale = tuple(
        DeleteValidator(pod=p)
        for p in pods
        if p.role is Role.VALIDATOR and p.attempt != detail.attempt and not p.deleting
    )

    def fail(reason: str, summary: dict[str, Any] | None = None) -> Step:
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.UPGRADE_FAILED,
            failure=True,
            detail=detail.but(
                failure={
                    "at": int(ctx.now),
                    "reason": reason,
                    "attempt": detail.attempt,
                    **({"verdict": summary} if summary else {}),
                }
            ),
            reason=reason,
        )

    def wait(reason: str) -> Step:
        if timed_out:
            return fail(f"validation did not finish within {timeout}s: {reason}")
        return Step(
            node=node, target=ctx.target, actions=stale, stamp=node.since is None, reason=reason
        )

    restarted = [p for p in _driver_pods(pods) if p.uid != detail.driver_pod]
    if not any(p.phase == "Running" and p.ready for p in restarted):
        return wait("waiting for the new driver pod to be Running and Ready")
    if node.driver != ctx.target:
        return wait(
            f"the node reports driver {node.driver}; waiting for feature discovery to report "
            f"{ctx.target}"
        )
    if node.gpu_capacity <= 0:
        return wait("the node advertises no nvidia.com/gpu capacity yet")
    current = [p for p in pods if p.role is Role.VALIDATOR and p.attempt == detail.attempt]
    if not current:
        if timed_out:
            return wait("no validator ran")
        manifest = validator_pod(
            node, attempt=detail.attempt, target=ctx.target, settings=ctx.settings
        )
        return Step(
            node=node,
            target=ctx.target,
            actions=(*stale, CreateValidator(manifest=manifest)),
            reason=f"validating: started validator attempt {detail.attempt}",
        )
    validator = current[0]
    if validator.terminated is None:
        if validator.phase in ("Succeeded", "Failed"):
            outcome_reason = f"validator {validator.key} ended {validator.phase} without a result"
            return _retry(node, validator, stale, outcome_reason, fail, timed_out, ctx)
        return wait(f"validator {validator.key} is {validator.phase}")
    outcome = read_verdict(validator.terminated, target=ctx.target, gpus=node.gpu_capacity)
    if outcome.kind == HEALTHY:
        if node.gpu_allocatable < node.gpu_capacity:
            return wait(
                f"healthy, but nvidia.com/gpu allocatable is {node.gpu_allocatable} of "
                f"{node.gpu_capacity}: waiting for the device plugin"
            )
        return Step(
            node=node,
            target=ctx.target,
            next_state=states.UNCORDON_REQUIRED,
            actions=stale,
            detail=detail.but(verdict=outcome.summary),
            reason=f"validated: {outcome.reason}; nvidia.com/gpu allocatable "
            f"{node.gpu_allocatable} of {node.gpu_capacity}",
        )
    if outcome.kind == UNHEALTHY:
        return fail(f"validation failed: {outcome.reason}", outcome.summary)
    return _retry(node, validator, stale, outcome.reason, fail, timed_out, ctx)


def _retry(
    node: NodeView,
    validator: PodView,
    stale: tuple[Action, ...],
    reason: str,
    fail: Any,
    timed_out: bool,
    ctx: Context,
) -> Step:
    if timed_out:
        return fail(
            f"validation did not finish within {ctx.settings.validation_timeout_seconds}s: {reason}"
        )
    attempt = node.detail.attempt + 1
    return Step(
        node=node,
        target=ctx.target,
        actions=(*stale, DeleteValidator(pod=validator)),
        detail=node.detail.but(attempt=attempt),
        reason=f"{reason}; trying again (attempt {attempt})",
    )


def on_uncordon(node: NodeView, pods: list[PodView], ctx: Context) -> Step:
    actions: list[Action] = []
    if node.detail.cordoned and node.unschedulable:
        actions.append(Uncordon())
    actions += [DeleteValidator(pod=p) for p in pods if p.role is Role.VALIDATOR and not p.deleting]
    done = node.driver == ctx.target
    return Step(
        node=node,
        target=ctx.target,
        next_state=states.UPGRADE_DONE if done else states.UPGRADE_REQUIRED,
        actions=tuple(actions),
        detail=node.detail.but(cordoned=False, failure=None),
        reason=(
            f"back in service on driver {ctx.target}"
            if done
            else f"back in service on driver {node.driver}; the upgrade starts again later"
        ),
    )


def on_done(node: NodeView, pods: list[PodView], ctx: Context) -> None:
    return None  # a new target is picked up by marking (step 4 of `plan_pool`)


HANDLERS: dict[str, Any] = {
    "": on_no_state,
    states.UPGRADE_REQUIRED: on_upgrade_required,
    states.CORDON_REQUIRED: on_cordon_required,
    states.WAIT_FOR_JOBS_REQUIRED: on_wait_for_jobs,
    states.DRAIN_REQUIRED: on_drain,
    states.DRIVER_RESTART_REQUIRED: on_driver_restart,
    states.VALIDATION_REQUIRED: on_validation,
    states.UNCORDON_REQUIRED: on_uncordon,
    states.UPGRADE_DONE: on_done,
}


def clear_step(
    node: NodeView, target: str, now: float, *, how: str, actor: str | None
) -> Step | None:
    """An operator clears a failed node: it goes back to validation (when it runs the target)
    or through the whole upgrade again (when it does not). It stays cordoned, and becomes done
    only after a validator passes again. None when there is nothing to clear."""
    failure = node.detail.failure
    if node.state != states.UPGRADE_FAILED and not (node.state is None and failure):
        return None
    at_target = node.driver == target
    cleared = {"at": int(now), "how": how, "failure": failure}
    if actor:
        cleared["by"] = actor
    detail = node.detail.but(
        failure=None,
        cleared=cleared,
        attempt=node.detail.attempt + 1 if at_target else node.detail.attempt,
        driver_pod=node.detail.driver_pod if at_target else None,
        target=target,
    )
    following = states.VALIDATION_REQUIRED if at_target else states.CORDON_REQUIRED
    return Step(
        node=node,
        target=target,
        next_state=following,
        detail=detail,
        reason=f"failure cleared ({how}): "
        + (
            "validating the node again"
            if at_target
            else f"driver {node.driver} is not {target}: upgrading the node again"
        ),
    )
