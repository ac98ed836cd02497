"""The validator pod that proves an upgraded node healthy, and how its result is read.

The pod is pinned to the node (`nodeName`, so it runs even while the node is cordoned and before
the device plugin is back), tolerates the node's taints, sees every GPU through the NVIDIA
runtime (`NVIDIA_VISIBLE_DEVICES=all`, no `nvidia.com/gpu` request) and runs

    fleetplane controller upgrade validate --expect-driver <target> --expect-gpus <capacity>

which runs `fleetplane health check` with the same arguments as a child process,
passes its full JSON verdict through to the pod's log, and writes a compact verdict (status,
versions, counts, problems; at most 4096 bytes, the kubelet's limit) to the termination-message
file. `terminationMessagePolicy: FallbackToLogsOnError` keeps the log tail as the message when
that file stays empty and the container fails. The kubelet only falls back to logs for a
failing container, and truncates a termination message to 4 KiB, so the health check's own
output (indented, one block per GPU) could not be read back from the message in full: hence
the compact copy.

The controller reads `status.containerStatuses[0].state.terminated`: the exit code (0 healthy,
1 unhealthy, 2 could not check) and the compact verdict in `message`.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import orjson

from controller.nodeflow.keys import (
    APP_NAME_LABEL,
    VALIDATOR_APP,
    VALIDATOR_ATTEMPT_LABEL,
    VALIDATOR_NODE_ANNOTATION,
)
from controller.nodeflow.nodes import NodeView
from controller.nodeflow.pods import Terminated
from fleet import labels as keys

CONTAINER = "validate"
MESSAGE_LIMIT = 4096
HEALTHY, UNHEALTHY, UNAVAILABLE = "healthy", "unhealthy", "unavailable"
NO_DRIVER = "no-driver"
"""The verdict's `reason` when libnvidia-ml is not loadable (controller.health.verdict): waiting
does not bring a driver, so the node fails at once rather than at the validation timeout."""


class ValidatorSettings(Protocol):
    """What the validator pod is made of (`controller.nodeflow.settings.WorkflowSettings`)."""

    @property
    def validation_timeout_seconds(self) -> int: ...
    @property
    def validator_namespace(self) -> str: ...
    @property
    def validator_image(self) -> str: ...
    @property
    def validator_runtime_class(self) -> str | None: ...
    @property
    def max_temperature_c(self) -> float | None: ...
    @property
    def xid_wait_seconds(self) -> float | None: ...


def validator_name(node: str, attempt: int) -> str:
    name = f"fleetplane-validate-{node}-{attempt}"
    if len(name) <= 253:
        return name
    digest = hashlib.sha256(node.encode()).hexdigest()[:10]
    return f"fleetplane-validate-{node[:200]}-{digest}-{attempt}"


def health_args(node: NodeView, target: str, settings: ValidatorSettings) -> list[str]:
    """Arguments of `fleetplane health check` for this node."""
    args = ["--expect-driver", target, "--expect-gpus", str(node.gpu_capacity)]
    if settings.max_temperature_c is not None:
        args += ["--max-temperature-c", str(settings.max_temperature_c)]
    if settings.xid_wait_seconds is not None:
        args += ["--xid-wait-seconds", f"{settings.xid_wait_seconds:g}"]
    return args


def _toleration(taint: dict[str, Any]) -> dict[str, Any]:
    toleration: dict[str, Any] = {"key": taint.get("key", ""), "effect": taint.get("effect", "")}
    if taint.get("value"):
        toleration.update(operator="Equal", value=taint["value"])
    else:
        toleration["operator"] = "Exists"
    return toleration


def validator_pod(
    node: NodeView, *, attempt: int, target: str, settings: ValidatorSettings
) -> dict[str, Any]:
    tolerations = [_toleration(t) for t in node.taints]
    for key in ("node.kubernetes.io/unschedulable", "nvidia.com/gpu"):
        if not any(t["key"] == key for t in tolerations):
            tolerations.append({"key": key, "operator": "Exists", "effect": "NoSchedule"})
    spec: dict[str, Any] = {
        "nodeName": node.name,
        "restartPolicy": "Never",
        "tolerations": tolerations,
        "activeDeadlineSeconds": settings.validation_timeout_seconds,
        "automountServiceAccountToken": False,
        "containers": [
            {
                "name": CONTAINER,
                "image": settings.validator_image,
                "command": ["fleetplane", "controller", "upgrade", "validate"],
                "args": health_args(node, target, settings),
                "env": [
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
                    {
                        "name": "NODE_NAME",
                        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                    },
                ],
                "resources": {
                    "requests": {"cpu": "50m", "memory": "128Mi"},
                    "limits": {"memory": "512Mi"},
                },
                "terminationMessagePolicy": "FallbackToLogsOnError",
            }
        ],
    }
    if settings.validator_runtime_class:
        spec["runtimeClassName"] = settings.validator_runtime_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": validator_name(node.name, attempt),
            "namespace": settings.validator_namespace,
            "labels": {
                APP_NAME_LABEL: VALIDATOR_APP,
                keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
                VALIDATOR_ATTEMPT_LABEL: str(attempt),
            },
            "annotations": {
                VALIDATOR_NODE_ANNOTATION: node.name,
                "fleetplane.dev/upgrade-target": target,
            },
        },
        "spec": spec,
    }


# --- the verdict ------------------------------------------------------------------------------


def termination_message(document: dict[str, Any], limit: int = MESSAGE_LIMIT) -> str:
    """The compact verdict written to the termination-message file: the health check's verdict
    without the per-GPU readings, problems cut to fit `limit` bytes (`problems_omitted` says
    how many were left out)."""
    expected = document.get("expected") or {}
    problems = [
        {
            "device": p.get("device"),
            "check": p.get("check"),
            "detail": str(p.get("detail", ""))[:200],
        }
        for p in document.get("problems") or ()
        if isinstance(p, dict)
    ]
    compact: dict[str, Any] = {
        "status": document.get("status"),
        "reason": document.get("reason"),
        "healthy": document.get("healthy"),
        "node": document.get("node"),
        "driver_version": document.get("driver_version"),
        "device_count": document.get("device_count"),
        "expected": {
            k: expected.get(k) for k in ("driver_version", "gpu_count", "max_temperature_c")
        },
        "problems": problems,
    }
    omitted = 0
    text = orjson.dumps(compact).decode()
    while len(text.encode()) > limit and compact["problems"]:
        compact["problems"].pop()
        omitted += 1
        compact["problems_omitted"] = omitted
        text = orjson.dumps(compact).decode()
    return text


@dataclass(frozen=True, kw_only=True)
class Outcome:
    """What a finished validator says: `healthy`, `unhealthy` (the node fails) or `unavailable`
    (nothing was proven either way: try again until the validation timeout)."""

    kind: str
    reason: str
    summary: dict[str, Any]


def read_verdict(terminated: Terminated, *, target: str, gpus: int) -> Outcome:
    """Judge a terminated validator. Healthy needs exit 0 *and* a verdict that reports the target
    driver, the expected GPU count and no problem; exit 0 without a readable verdict proves
    nothing."""
    document: dict[str, Any] | None = None
    try:
        parsed = orjson.loads(terminated.message) if terminated.message else None
        document = parsed if isinstance(parsed, dict) else None
    except orjson.JSONDecodeError:
        document = None
    code = terminated.exit_code
    problems = list((document or {}).get("problems") or [])
    summary: dict[str, Any] = {"exit_code": code}
    if document is not None:
        summary.update(
            status=document.get("status"),
            verdict_reason=document.get("reason"),
            driver_version=document.get("driver_version"),
            device_count=document.get("device_count"),
            problems=problems[:10],
        )
    else:
        summary["message"] = terminated.message[-300:]
    if code == 0:
        if document is None:
            return Outcome(
                kind=UNAVAILABLE,
                reason="validator exited 0 without a verdict in its termination message",
                summary=summary,
            )
        mismatches = []
        if document.get("status") != HEALTHY or problems:
            mismatches.append(f"verdict status {document.get('status')!r} with problems")
        if document.get("driver_version") != target:
            mismatches.append(f"driver {document.get('driver_version')} is loaded, not {target}")
        if document.get("device_count") != gpus:
            mismatches.append(f"{document.get('device_count')} GPUs found, {gpus} expected")
        if mismatches:
            return Outcome(kind=UNHEALTHY, reason="; ".join(mismatches), summary=summary)
        return Outcome(
            kind=HEALTHY,
            reason=f"driver {target}, {gpus} GPUs, every health check passed",
            summary=summary,
        )
    details = "; ".join(
        f"{'GPU ' + str(p.get('device')) if p.get('device') is not None else 'node'}: "
        f"{p.get('check')}: {p.get('detail')}"
        for p in problems[:5]
        if isinstance(p, dict)
    )
    if document is not None and document.get("reason") == NO_DRIVER:
        return Outcome(
            kind=UNHEALTHY,
            reason=f"no NVIDIA driver on the node ({NO_DRIVER}): libnvidia-ml is not loadable"
            + (f"; {details}" if details else ""),
            summary=summary,
        )
    if code == 1:
        return Outcome(
            kind=UNHEALTHY,
            reason=details or f"validator reported the node unhealthy: {terminated.message[-300:]}",
            summary=summary,
        )
    why = details or terminated.reason or terminated.message[-200:] or "no message"
    return Outcome(
        kind=UNAVAILABLE,
        reason=f"validator could not check (exit {code}): {why}",
        summary=summary,
    )


TERMINATION_LOG = Path(os.environ.get("TERMINATION_MESSAGE_PATH", "/dev/termination-log"))


def run_validation(check_args: Sequence[str], *, termination_log: Path = TERMINATION_LOG) -> int:
    """What the validator pod runs (`fleetplane controller upgrade validate <options>`).

    Runs `fleetplane health check <options>` as a child process (it loads NVML, which must not
    take this process down with it), copies its output (the full JSON verdict) to stdout so the
    pod's log keeps it, writes the compact verdict (`termination_message`) to the
    termination-message file, and exits with the check's exit status. When the check printed no
    verdict, nothing is written and the exit status still says what happened (the kubelet then
    falls back to the log tail, as the pod asks)."""
    result = subprocess.run(
        [sys.executable, "-m", "fleetplane", "health", "check", *check_args],
        stdout=subprocess.PIPE,
        check=False,
    )
    sys.stdout.buffer.write(result.stdout)
    sys.stdout.flush()
    try:
        document = orjson.loads(result.stdout)
    except orjson.JSONDecodeError:
        return result.returncode
    if isinstance(document, dict):
        try:
            termination_log.write_text(termination_message(document))
        except OSError as error:
            print(f"cannot write {termination_log}: {error}", file=sys.stderr)
    return result.returncode
