"""The pods that carry out a remedy on a drained node when `health.recovery` is `act`: a GPU
reset and a node reboot, each a privileged pod pinned to the node, from the validator image
(Python, this package, nvidia-ml-py; the NVIDIA container runtime adds `nvidia-smi` and the
driver's libraries to a container that asks for the `utility` capability).

As NVIDIA's own remediation does it (NVSentinel's Janitor, "GPU reset" design: a short-lived
privileged Job with `nodeName`, after the GPU Operator's node daemons were told to leave the
node through their `nvidia.com/gpu.deploy.<operand>=false` labels, so that nothing holds the
device), the reset pod runs `fleetplane health reset --gpu N`: persistence mode off,
`nvidia-smi --gpu-reset -i N`, persistence mode back as it was. The reboot pod runs
`fleetplane health reboot`: with the host's PID namespace it sends systemd (PID 1) its reboot
signal, SIGRTMIN+5 (systemd(1); kured's `--reboot-method=signal` does the same), so the host
shuts down in order. A short-lived pod rather than a DaemonSet: nothing privileged runs on a
node between remedies.

The pod's outcome is read from its first container's termination: exit 0 with the compact JSON
the command writes to its termination-message file. A reboot is proven by the node, not the
pod: the node reports another `status.nodeInfo.bootID`.
"""

from __future__ import annotations

from typing import Any, Final

from controller.nodeflow.keys import APP_NAME_LABEL
from controller.nodeflow.nodes import NodeView
from controller.nodeflow.pods import PodView
from controller.nodeflow.validator import ValidatorSettings
from controller.remediation import states
from fleet import labels as keys

REMEDY_APP: Final = "fleetplane-gpu-remedy"
"""`app.kubernetes.io/name` of the remedy pods."""
REMEDY_ATTEMPT_LABEL: Final = "fleetplane.dev/remedy-attempt"
REMEDY_KIND_LABEL: Final = "fleetplane.dev/remedy"
CONTAINER: Final = "remedy"

OPERAND_DEPLOY_LABELS: Final = (
    "nvidia.com/gpu.deploy.device-plugin",
    "nvidia.com/gpu.deploy.gpu-feature-discovery",
    "nvidia.com/gpu.deploy.dcgm-exporter",
    "nvidia.com/gpu.deploy.dcgm",
)
"""The GPU Operator's per-node switches of the daemons that hold a GPU open (device plugin,
feature discovery, DCGM and its exporter): set to `false` before a reset, as NVSentinel's
reset does, and back afterwards. The driver and the container toolkit stay."""

OPERAND_APPS: Final = frozenset(
    {
        "nvidia-device-plugin-daemonset",
        "gpu-feature-discovery",
        "nvidia-dcgm-exporter",
        "nvidia-dcgm",
    }
)
"""The `app` label of those daemons' pods (the GPU Operator's DaemonSets): a reset waits until
none runs on the node."""


def remedy_pod_name(remedy: str, node: str, attempt: int) -> str:
    return f"fleetplane-{remedy}-{node}-{attempt}"[:253]


def is_remedy_pod(pod: PodView) -> bool:
    return pod.labels.get(APP_NAME_LABEL) == REMEDY_APP


def holds_gpu(pod: PodView) -> bool:
    """A GPU Operator daemon that must leave the node before its GPUs can be reset."""
    return pod.labels.get("app") in OPERAND_APPS and pod.active and not pod.deleting


def _tolerate_all() -> list[dict[str, Any]]:
    # The node is cordoned and tainted by this machine (and may carry others): the remedy must
    # run there regardless.
    return [{"operator": "Exists"}]


def remedy_pod(
    node: NodeView,
    *,
    remedy: str,
    attempt: int,
    gpus: list[str],
    settings: ValidatorSettings,
) -> dict[str, Any]:
    """The privileged pod that carries out `remedy` (`gpu-reset` of `gpus`, or `reboot`) on the
    node."""
    if remedy == states.GPU_RESET:
        command = ["fleetplane", "health", "reset"]
        args = [arg for gpu in gpus for arg in ("--gpu", gpu)]
    else:
        command = ["fleetplane", "health", "reboot"]
        args = []
    env: list[dict[str, Any]] = [
        {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}
    ]
    if remedy == states.GPU_RESET:
        env[:0] = [
            {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
            {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
        ]
    spec: dict[str, Any] = {
        "nodeName": node.name,
        "restartPolicy": "Never",
        "tolerations": _tolerate_all(),
        "activeDeadlineSeconds": 600,
        "automountServiceAccountToken": False,
        "terminationGracePeriodSeconds": 30,
        "containers": [
            {
                "name": CONTAINER,
                "image": settings.validator_image,
                "command": command,
                "args": args,
                "env": env,
                "securityContext": {"privileged": True},
                "resources": {
                    "requests": {"cpu": "50m", "memory": "64Mi"},
                    "limits": {"memory": "256Mi"},
                },
                "terminationMessagePolicy": "FallbackToLogsOnError",
            }
        ],
    }
    if remedy == states.REBOOT:
        spec["hostPID"] = True
    elif settings.validator_runtime_class:
        spec["runtimeClassName"] = settings.validator_runtime_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": remedy_pod_name(remedy, node.name, attempt),
            "namespace": settings.validator_namespace,
            "labels": {
                APP_NAME_LABEL: REMEDY_APP,
                keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
                REMEDY_ATTEMPT_LABEL: str(attempt),
                REMEDY_KIND_LABEL: remedy,
            },
            "annotations": {"fleetplane.dev/remedy-node": node.name},
        },
        "spec": spec,
    }


def gpus_of(fault: dict[str, Any] | None) -> list[str]:
    """The GPUs a reset is for: the fault's GPU (DCGM's `gpu` label, the NVML index that
    `nvidia-smi -i` takes). None named: every GPU of the node is reset by index by the
    caller."""
    gpu = str((fault or {}).get("gpu") or "").strip()
    return [gpu] if gpu.isdigit() else []
