"""Hardware facts about accelerators and the machine types that carry them.

These are properties of the hardware and of the clouds, not choices of the platform engineer,
so they live in code rather than in the stack configuration: what resource a model is exposed
as, the label value the GPU Operator or GKE puts on its nodes, its memory, its MIG profiles,
and for each machine type which model it carries and how many. Prices are choices (they
depend on contracts and regions) and live in the configuration.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from components import labels

Cloud = Literal["aws", "gcp"]


@dataclass(frozen=True, kw_only=True)
class AcceleratorModel:
    """One accelerator model.

    resource: the extended resource pods request (`nvidia.com/gpu` or `google.com/tpu`).
    node_label: the node label that identifies the model.
    label_value: the value of `node_label` on nodes carrying this model.
    memory_mib: device memory as GPU Feature Discovery reports it (`nvidia.com/gpu.memory`).
    family: GPU architecture (`nvidia.com/gpu.family`), empty for TPUs.
    mig_profiles: MIG profile -> instances per GPU with the `all-<profile>` layout; empty when
        the model has no MIG.
    gke_accelerator: GKE guest accelerator type, empty when GKE does not offer it.
    tpu_topology_dims: number of dimensions of a slice topology (2 for v5e/v6e, 3 for v4/v5p).
    """

    name: str
    resource: str
    node_label: str
    label_value: str
    memory_mib: int = 0
    family: str = ""
    mig_profiles: dict[str, int] = field(default_factory=dict)
    gke_accelerator: str = ""
    tpu_topology_dims: int = 0

    @property
    def is_tpu(self) -> bool:
        return self.resource == labels.TPU_RESOURCE


@dataclass(frozen=True, kw_only=True)
class MachineType:
    """A machine type and the accelerators it always carries.

    cloud: the cloud that sells it (local clusters accept any).
    model: accelerator model name.
    accelerators: accelerators per machine (GPUs, or TPU chips per host).
    gke_accelerator: GKE guest accelerator type when this machine type needs another one than
        its model's (A3 Mega: `nvidia-h100-mega-80gb`, though its GPUs are H100 80GB HBM3 like
        A3 High's); empty to use the model's.
    """

    name: str
    cloud: Cloud
    model: str
    accelerators: int
    gke_accelerator: str = ""


def _gpu(name: str, label: str, memory: int, family: str, **kw: object) -> AcceleratorModel:
    return AcceleratorModel(
        name=name,
        resource=labels.GPU_RESOURCE,
        node_label=labels.GPU_PRODUCT,
        label_value=label,
        memory_mib=memory,
        family=family,
        **kw,  # type: ignore[arg-type]
    )


def _tpu(name: str, label: str, dims: int) -> AcceleratorModel:
    return AcceleratorModel(
        name=name,
        resource=labels.TPU_RESOURCE,
        node_label=labels.TPU_ACCELERATOR,
        label_value=label,
        tpu_topology_dims=dims,
    )


_H100_MIG = {"1g.10gb": 7, "1g.20gb": 4, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}
_A100_40_MIG = {"1g.5gb": 7, "2g.10gb": 3, "3g.20gb": 2, "4g.20gb": 1, "7g.40gb": 1}
_A100_80_MIG = {"1g.10gb": 7, "2g.20gb": 3, "3g.40gb": 2, "4g.40gb": 1, "7g.80gb": 1}

MODELS: dict[str, AcceleratorModel] = {
    m.name: m
    for m in (
        _gpu(
            "h100-80gb",
            "NVIDIA-H100-80GB-HBM3",
            81559,
            "hopper",
            mig_profiles=_H100_MIG,
            gke_accelerator="nvidia-h100-80gb",
        ),
        _gpu(
            "a100-40gb",
            "NVIDIA-A100-SXM4-40GB",
            40960,
            "ampere",
            mig_profiles=_A100_40_MIG,
            gke_accelerator="nvidia-tesla-a100",
        ),
        _gpu(
            "a100-80gb",
            "NVIDIA-A100-SXM4-80GB",
            81920,
            "ampere",
            mig_profiles=_A100_80_MIG,
            gke_accelerator="nvidia-a100-80gb",
        ),
        _gpu("l4", "NVIDIA-L4", 23034, "ada-lovelace", gke_accelerator="nvidia-l4"),
        _gpu("a10g", "NVIDIA-A10G", 23028, "ampere"),
        _gpu("t4", "Tesla-T4", 15360, "turing", gke_accelerator="nvidia-tesla-t4"),
        _tpu("tpu-v4", "tpu-v4-podslice", 3),
        _tpu("tpu-v5e", "tpu-v5-lite-podslice", 2),
        _tpu("tpu-v5p", "tpu-v5p-slice", 3),
        _tpu("tpu-v6e", "tpu-v6e-slice", 2),
    )
}


MACHINE_TYPES: dict[str, MachineType] = {
    m.name: m
    for m in (
        # AWS
        MachineType(name="p5.48xlarge", cloud="aws", model="h100-80gb", accelerators=8),
        MachineType(name="p4d.24xlarge", cloud="aws", model="a100-40gb", accelerators=8),
        MachineType(name="p4de.24xlarge", cloud="aws", model="a100-80gb", accelerators=8),
        MachineType(name="g5.xlarge", cloud="aws", model="a10g", accelerators=1),
        MachineType(name="g5.2xlarge", cloud="aws", model="a10g", accelerators=1),
        MachineType(name="g5.12xlarge", cloud="aws", model="a10g", accelerators=4),
        MachineType(name="g5.48xlarge", cloud="aws", model="a10g", accelerators=8),
        MachineType(name="g6.xlarge", cloud="aws", model="l4", accelerators=1),
        MachineType(name="g6.2xlarge", cloud="aws", model="l4", accelerators=1),
        MachineType(name="g6.12xlarge", cloud="aws", model="l4", accelerators=4),
        MachineType(name="g6.48xlarge", cloud="aws", model="l4", accelerators=8),
        MachineType(name="g4dn.xlarge", cloud="aws", model="t4", accelerators=1),
        MachineType(name="g4dn.12xlarge", cloud="aws", model="t4", accelerators=4),
        # GCP GPUs
        MachineType(name="a3-highgpu-8g", cloud="gcp", model="h100-80gb", accelerators=8),
        # GKE: "NVIDIA H100 80GB Mega GPUs (nvidia-h100-mega-80gb accelerator type, A3 Mega
        # machine type)"; GPU Feature Discovery still reports NVIDIA-H100-80GB-HBM3.
        MachineType(
            name="a3-megagpu-8g",
            cloud="gcp",
            model="h100-80gb",
            accelerators=8,
            gke_accelerator="nvidia-h100-mega-80gb",
        ),
        MachineType(name="a2-highgpu-1g", cloud="gcp", model="a100-40gb", accelerators=1),
        MachineType(name="a2-highgpu-2g", cloud="gcp", model="a100-40gb", accelerators=2),
        MachineType(name="a2-highgpu-4g", cloud="gcp", model="a100-40gb", accelerators=4),
        MachineType(name="a2-highgpu-8g", cloud="gcp", model="a100-40gb", accelerators=8),
        MachineType(name="a2-megagpu-16g", cloud="gcp", model="a100-40gb", accelerators=16),
        MachineType(name="a2-ultragpu-1g", cloud="gcp", model="a100-80gb", accelerators=1),
        MachineType(name="a2-ultragpu-8g", cloud="gcp", model="a100-80gb", accelerators=8),
        MachineType(name="g2-standard-4", cloud="gcp", model="l4", accelerators=1),
        MachineType(name="g2-standard-8", cloud="gcp", model="l4", accelerators=1),
        MachineType(name="g2-standard-16", cloud="gcp", model="l4", accelerators=1),
        MachineType(name="g2-standard-24", cloud="gcp", model="l4", accelerators=2),
        MachineType(name="g2-standard-48", cloud="gcp", model="l4", accelerators=4),
        MachineType(name="g2-standard-96", cloud="gcp", model="l4", accelerators=8),
        # GCP TPUs: accelerators are chips per host.
        MachineType(name="ct4p-hightpu-4t", cloud="gcp", model="tpu-v4", accelerators=4),
        MachineType(name="ct5lp-hightpu-1t", cloud="gcp", model="tpu-v5e", accelerators=1),
        MachineType(name="ct5lp-hightpu-4t", cloud="gcp", model="tpu-v5e", accelerators=4),
        MachineType(name="ct5lp-hightpu-8t", cloud="gcp", model="tpu-v5e", accelerators=8),
        MachineType(name="ct5p-hightpu-4t", cloud="gcp", model="tpu-v5p", accelerators=4),
        MachineType(name="ct6e-standard-1t", cloud="gcp", model="tpu-v6e", accelerators=1),
        MachineType(name="ct6e-standard-4t", cloud="gcp", model="tpu-v6e", accelerators=4),
        MachineType(name="ct6e-standard-8t", cloud="gcp", model="tpu-v6e", accelerators=8),
    )
}


def topology_chips(topology: str) -> int | None:
    """Chips in a TPU slice topology such as `2x4` or `2x2x4`; None when malformed."""
    parts = topology.split("x")
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        return None
    chips = 1
    for p in parts:
        chips *= int(p)
    return chips
