"""The `remediating` state when the controller carries out the remedy itself
(`health.recovery: act`); with `annotate` it writes the request and waits for an integration
(`recovery.on_remediating`).

A GPU reset, on the drained and cordoned node, in as many passes as it takes:

1. the GPU Operator's daemons that hold the GPUs open are switched off on the node (their
   `nvidia.com/gpu.deploy.<operand>` labels set to `false`, the values before kept in the
   detail's `paused`), and the pass waits until none of their pods runs there;
2. the reset pod (`remedy_pods`) runs `fleetplane health reset --gpu N`, asked of OPA as
   `gpu-reset` (OPA checks the node is cordoned and holds no GPU work);
3. exit 0: the labels are put back, the pod deleted, the node goes to `validating`; anything
   else (or `remediation_timeout_seconds`): the labels are put back and the remedy escalates
   to a reboot.

A reboot: the node's boot ID is recorded and the reboot pod started (asked as `reboot`); a node
that reports another boot ID, Ready, goes to `validating`; a reboot pod that exits non-zero
(it refuses when PID 1 is not systemd) or the timeout escalates to replacement.

An integration's answer (`fleetplane.dev/remediation-done` = the request id) still counts in
this mode, so a DCIM may carry out a remedy first.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Final

from controller.nodeflow.consumers import Role
from controller.nodeflow.pods import PodView
from controller.observe.model import format_time
from controller.remediation import states
from controller.remediation.classify import NodeVerdict
from controller.remediation.observe import HealthNode
from controller.remediation.recovery import escalate, on_remediating
from controller.remediation.remedy_pods import (
    OPERAND_DEPLOY_LABELS,
    REMEDY_ATTEMPT_LABEL,
    REMEDY_KIND_LABEL,
    gpus_of,
    holds_gpu,
    is_remedy_pod,
    remedy_pod,
)
from controller.remediation.steps import (
    Action,
    Context,
    EndRemedy,
    Relabel,
    StartRemedy,
    Step,
)

ACT: Final = "act"
ANNOTATE: Final = "annotate"


def on_remediating_any(node: HealthNode, verdict: NodeVerdict | None, ctx: Context) -> Step:
    if ctx.settings.recovery != ACT:
        return on_remediating(node, verdict, ctx)
    return on_remediating_act(node, ctx)


def gpu_work(pods: list[PodView]) -> list[PodView]:
    """Pods that still hold or use the node's GPUs as work (what a reset must never hit)."""
    return [
        p for p in pods if p.gpu and p.role is Role.WORKLOAD and p.active and not is_remedy_pod(p)
    ]


def on_remediating_act(node: HealthNode, ctx: Context) -> Step:
    remedy = node.detail.remedy or states.GPU_RESET
    attempt = node.detail.attempt
    pods = ctx.snapshot.pods_on(node.name)
    mine = [p for p in pods if is_remedy_pod(p) and not p.deleting]
    current = [
        p
        for p in mine
        if p.labels.get(REMEDY_ATTEMPT_LABEL) == str(attempt)
        and p.labels.get(REMEDY_KIND_LABEL) == remedy
    ]
    stale = tuple(EndRemedy(pod=p) for p in mine if p not in current)
    annotations = node.view.annotations
    request_id = annotations.get(states.REQUEST_ID_ANNOTATION)
    if request_id and annotations.get(states.DONE_ANNOTATION) == request_id:
        return _validate(
            node,
            tuple(EndRemedy(pod=p) for p in mine),
            f"{remedy} done by an integration (request {request_id}): validating the GPUs",
        )
    if remedy == states.REBOOT:
        return _reboot(node, ctx, current, stale)
    return _reset(node, ctx, current, stale)


def _restore(node: HealthNode) -> tuple[Action, ...]:
    if not node.detail.paused:
        return ()
    return (Relabel(labels=dict(node.detail.paused)),)


def _validate(node: HealthNode, ends: tuple[Action, ...], why: str) -> Step:
    return Step(
        node=node,
        decision="validate",
        next_state=states.VALIDATING,
        actions=(*ends, *_restore(node)),
        detail=node.detail.but(paused={}, boot_id=None),
        reason=why,
    )


def _escalate(node: HealthNode, ctx: Context, ends: tuple[Action, ...], why: str) -> Step:
    step = escalate(node, ctx, why)
    detail = step.detail.but(paused={}, boot_id=None) if step.detail else None
    return replace(step, actions=(*ends, *_restore(node), *step.actions), detail=detail)


def _timed_out(node: HealthNode, ctx: Context) -> bool:
    since = node.since if node.since is not None else ctx.now
    return ctx.now >= since + ctx.settings.remediation_timeout_seconds


def _outcome(pod: PodView) -> tuple[bool, str] | None:
    """None while the pod runs; else (succeeded, what it said)."""
    terminated = pod.terminated
    if terminated is None:
        if pod.phase == "Failed":
            return False, f"pod {pod.key} failed without running its command"
        return None
    said = terminated.message.strip()[-300:] or terminated.reason or "no message"
    return terminated.exit_code == 0, f"pod {pod.key} exited {terminated.exit_code}: {said}"


def _reset(
    node: HealthNode, ctx: Context, current: list[PodView], stale: tuple[Action, ...]
) -> Step:
    pods = ctx.snapshot.pods_on(node.name)
    if current:
        outcome = _outcome(current[0])
        if outcome is None:
            if _timed_out(node, ctx):
                return _escalate(
                    node,
                    ctx,
                    (*stale, EndRemedy(pod=current[0])),
                    f"reset pod {current[0].key} did not finish in {ctx.settings.remediation_timeout_seconds}s",
                )
            return Step(
                node=node,
                decision="wait",
                actions=stale,
                stamp=node.since is None,
                reason=f"GPU reset running in {current[0].key} ({current[0].phase})",
            )
        ok, said = outcome
        ends = (*stale, EndRemedy(pod=current[0]))
        if ok:
            return _validate(node, ends, f"GPU reset done ({said}): validating the GPUs")
        return _escalate(node, ctx, ends, f"the GPU reset failed: {said}")
    if _timed_out(node, ctx):
        return _escalate(node, ctx, stale, "the GPU reset could not start in time")
    work = gpu_work(pods)
    if work:
        return Step(
            node=node,
            decision="wait",
            actions=stale,
            stamp=node.since is None,
            reason="GPU work is still on the node: "
            + ", ".join(sorted(p.key for p in work)[:5])
            + "; no reset while it runs",
        )
    labels = node.view.labels
    pause: dict[str, str | None] = {
        k: "false" for k in OPERAND_DEPLOY_LABELS if labels.get(k) != "false"
    }
    paused = {**{k: labels.get(k) for k in pause}, **node.detail.paused}
    actions: list[Action] = list(stale)
    if pause:
        actions.append(Relabel(labels=pause))
    holders = [p for p in pods if holds_gpu(p)]
    gpus = gpus_of(node.detail.fault) or [str(i) for i in range(node.view.gpu_capacity)]
    if holders:
        return Step(
            node=node,
            decision="gpu-reset" if pause else "wait",
            actions=tuple(actions),
            detail=node.detail.but(paused=paused) if pause else None,
            stamp=node.since is None,
            gpu_pods=0,
            reason="GPU Operator daemons switched off on the node; waiting for "
            + ", ".join(sorted(p.key for p in holders)[:5])
            + " to leave before the reset",
        )
    manifest = remedy_pod(
        node.view,
        remedy=states.GPU_RESET,
        attempt=node.detail.attempt,
        gpus=gpus,
        settings=ctx.settings.workflow,
    )
    actions.append(StartRemedy(remedy=states.GPU_RESET, manifest=manifest))
    return Step(
        node=node,
        decision="gpu-reset",
        actions=tuple(actions),
        detail=node.detail.but(paused=paused),
        stamp=node.since is None,
        gpu_pods=0,
        reason=f"drained and cordoned: resetting GPU {', '.join(gpus)} (nvidia-smi --gpu-reset)",
    )


def _reboot(
    node: HealthNode, ctx: Context, current: list[PodView], stale: tuple[Action, ...]
) -> Step:
    started = node.detail.boot_id is not None
    if started:
        ends = (*stale, *(EndRemedy(pod=p) for p in current))
        if node.boot_id and node.boot_id != node.detail.boot_id and node.view.ready:
            return _validate(
                node,
                ends,
                f"the node rebooted (boot ID {node.detail.boot_id} -> {node.boot_id}): validating the GPUs",
            )
        outcome = _outcome(current[0]) if current else None
        if outcome is not None and not outcome[0]:
            return _escalate(node, ctx, ends, f"the reboot was refused: {outcome[1]}")
        if _timed_out(node, ctx):
            return _escalate(
                node,
                ctx,
                ends,
                f"the node did not come back with a new boot ID in {ctx.settings.remediation_timeout_seconds}s",
            )
        since = node.since if node.since is not None else ctx.now
        return Step(
            node=node,
            decision="wait",
            actions=stale,
            stamp=node.since is None,
            reason="waiting for the node to reboot (a new boot ID, Ready) until "
            + format_time(since + ctx.settings.remediation_timeout_seconds),
        )
    if _timed_out(node, ctx):
        return _escalate(node, ctx, stale, "the reboot could not start in time")
    work = gpu_work(ctx.snapshot.pods_on(node.name))
    manifest = remedy_pod(
        node.view,
        remedy=states.REBOOT,
        attempt=node.detail.attempt,
        gpus=[],
        settings=ctx.settings.workflow,
    )
    actions = (
        *stale,
        *(() if current else (StartRemedy(remedy=states.REBOOT, manifest=manifest),)),
    )
    return Step(
        node=node,
        decision="reboot",
        actions=actions,
        detail=node.detail.but(boot_id=node.boot_id or "unknown"),
        stamp=node.since is None,
        gpu_pods=len(work),
        reason=f"drained and cordoned: rebooting the node (boot ID {node.boot_id or 'unknown'})",
    )
