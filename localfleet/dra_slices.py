"""What NVIDIA's DRA driver for GPUs publishes, for the local fleet's fake GPU nodes.

NVIDIA's k8s-dra-driver-gpu runs a kubelet plugin on each GPU node that publishes the node's
GPUs as one ResourceSlice of driver `gpu.nvidia.com` (pool = the node), one device `gpu-<minor>`
per GPU with the attributes of its `GpuInfo.GetDevice` (cmd/gpu-kubelet-plugin/deviceinfo.go):
`type` ("gpu"), `uuid`, `productName`, `brand`, `architecture` (NVML's names),
`cudaComputeCapability`, `driverVersion` and `cudaDriverVersion` (semantic versions),
`pcieBusID`, and the standard `resource.kubernetes.io/pcieRoot`, with a `memory` capacity;
its chart installs the DeviceClass `gpu.nvidia.com` selecting them. The fake nodes have no
kubelet, so these are written for them from what their labels say (GPU Feature Discovery's
product, count and driver labels) and the NVML facts of each model below; the real
kube-scheduler allocates claims from them (DRA is GA in the pinned Kubernetes).

The fake nodes also advertise `nvidia.com/gpu` in their capacity (the device plugin's view), and
nothing keeps the two apart here: a pod asking through a claim and one asking through
`nvidia.com/gpu` can be given the same fake GPU. A real node runs one or the other.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from fleet import catalog, labels

DRIVER = "gpu.nvidia.com"
API_VERSION = "resource.k8s.io/v1"
DEVICE_CLASS: dict[str, Any] = {
    "apiVersion": API_VERSION,
    "kind": "DeviceClass",
    "metadata": {"name": DRIVER},
    "spec": {
        "selectors": [
            {
                "cel": {
                    "expression": (
                        f"device.driver == '{DRIVER}' && "
                        f"device.attributes['{DRIVER}'].type == 'gpu'"
                    )
                }
            }
        ]
    },
}
"""The DeviceClass NVIDIA's chart installs for whole GPUs (deviceclass-gpu.yaml)."""


@dataclass(frozen=True)
class NvmlFacts:
    """What NVML reports of a model: `nvmlDeviceGetName`, the brand and architecture as
    go-nvlib names them, and the CUDA compute capability."""

    product_name: str
    brand: str
    architecture: str
    compute_capability: str


NVML = {
    "h100-80gb": NvmlFacts("NVIDIA H100 80GB HBM3", "Nvidia", "Hopper", "9.0"),
    "a100-40gb": NvmlFacts("NVIDIA A100-SXM4-40GB", "Nvidia", "Ampere", "8.0"),
    "a100-80gb": NvmlFacts("NVIDIA A100-SXM4-80GB", "Nvidia", "Ampere", "8.0"),
    "l4": NvmlFacts("NVIDIA L4", "Nvidia", "Ada Lovelace", "8.9"),
    "a10g": NvmlFacts("NVIDIA A10G", "Nvidia", "Ampere", "8.6"),
    "a10": NvmlFacts("NVIDIA A10", "Nvidia", "Ampere", "8.6"),
    "t4": NvmlFacts("Tesla T4", "Tesla", "Turing", "7.5"),
    "v100-16gb": NvmlFacts("Tesla V100-SXM2-16GB", "Tesla", "Volta", "7.0"),
    "v100-32gb": NvmlFacts("Tesla V100-SXM2-32GB", "Tesla", "Volta", "7.0"),
}
"""Keyed by catalog model; a model missing here gets no slice (the local fleet uses H100s and
A100s). GPU Feature Discovery's product label is `product_name` with dashes for spaces."""

CUDA_OF_DRIVER = {"535": "12.2", "550": "12.4", "560": "12.6", "565": "12.7", "570": "12.8"}
"""The CUDA version each driver branch reports (`nvmlSystemGetCudaDriverVersion`)."""


def _semver(version: str) -> str:
    """A version as the driver publishes it: three numbers, without leading zeros (semver)."""
    parts = [str(int(p)) for p in version.split(".") if p.isdigit()][:3]
    return ".".join([*parts, "0", "0"][:3])


def _model_of(node_labels: dict[str, str]) -> str | None:
    product = node_labels.get(labels.GPU_PRODUCT)
    for name, model in catalog.MODELS.items():
        if model.node_label == labels.GPU_PRODUCT and model.label_value == product:
            return name
    return None


def gpu_devices(node_name: str, node_labels: dict[str, str], count: int) -> list[dict[str, Any]]:
    """The devices the driver publishes for a node's `count` GPUs; [] for a model without NVML
    facts here."""
    model_name = _model_of(node_labels)
    if model_name is None or model_name not in NVML:
        return []
    facts, model = NVML[model_name], catalog.MODELS[model_name]
    driver = ".".join(
        node_labels.get(key, "0")
        for key in (labels.CUDA_DRIVER_MAJOR, labels.CUDA_DRIVER_MINOR, labels.CUDA_DRIVER_REV)
    )
    cuda = CUDA_OF_DRIVER.get(driver.split(".")[0], "12.8")
    devices = []
    for minor in range(count):
        bus = 0x18 + 0x10 * minor  # one PCIe switch per GPU, as on p5 and a3 machines
        attributes = {
            "type": {"string": "gpu"},
            "uuid": {"string": f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{node_name}/{minor}')}"},
            "productName": {"string": facts.product_name},
            "brand": {"string": facts.brand},
            "architecture": {"string": facts.architecture},
            "cudaComputeCapability": {"version": _semver(facts.compute_capability)},
            "driverVersion": {"version": _semver(driver)},
            "cudaDriverVersion": {"version": _semver(cuda)},
            "pcieBusID": {"string": f"0000:{bus:02x}:00.0"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{bus - 8:02x}"},
        }
        devices.append(
            {
                "name": f"gpu-{minor}",
                "attributes": attributes,
                "capacity": {"memory": {"value": f"{model.memory_mib}Mi"}},
            }
        )
    return devices


def resource_slices(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One ResourceSlice per fake GPU node (with `nvidia.com/gpu` capacity and a model with NVML
    facts), as the driver's kubelet plugin publishes it."""
    slices = []
    for node in nodes:
        name = node["metadata"]["name"]
        count = int(node.get("status", {}).get("capacity", {}).get(labels.GPU_RESOURCE, 0))
        devices = gpu_devices(name, node["metadata"].get("labels", {}), count)
        if not devices:
            continue
        slices.append(
            {
                "apiVersion": API_VERSION,
                "kind": "ResourceSlice",
                "metadata": {"name": f"{name}-{DRIVER}"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": name,
                    "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
                    "devices": devices,
                },
            }
        )
    return slices


def dra_objects(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The DeviceClass and the nodes' ResourceSlices; [] when no node has GPUs published."""
    slices = resource_slices(nodes)
    return [DEVICE_CLASS, *slices] if slices else []
