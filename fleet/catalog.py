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

from fleet import labels

Cloud = Literal["aws", "gcp"]


@dataclass(frozen=True, kw_only=True)
class ThermalLimits:
    """When a GPU of this model is too hot to keep taking work (controller/remediation).

    hot_c: a node is cordoned when a GPU stayed above this core temperature (DCGM_FI_DEV_GPU_TEMP)
        for every sample of `health.hot_for_seconds`.
    cool_c: it is uncordoned only when every GPU stayed at or below this for the same window.
        The gap between the two is the hysteresis that keeps a node near the line from flapping.

    Both sit below the slowdown temperature the driver enforces on its own (NVML
    `NVML_TEMPERATURE_THRESHOLD_SLOWDOWN`, which the validator's health check records per GPU):
    above `hot_c` the GPU is one fan or heat-sink fault away from clocking down a whole gang.
    85 C is the health check's own default limit (controller/health/judge.py); passively cooled
    PCIe boards (L4, A10G, T4) depend on the chassis airflow and get a lower line.
    """

    hot_c: int
    cool_c: int


_SXM_THERMAL = ThermalLimits(hot_c=85, cool_c=75)
_PCIE_THERMAL = ThermalLimits(hot_c=83, cool_c=73)


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
    thermal: temperature lines of the run-time health remediation; None for TPUs (no DCGM).
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
    thermal: ThermalLimits | None = None

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
            thermal=_SXM_THERMAL,
        ),
        _gpu(
            "a100-40gb",
            "NVIDIA-A100-SXM4-40GB",
            40960,
            "ampere",
            mig_profiles=_A100_40_MIG,
            gke_accelerator="nvidia-tesla-a100",
            thermal=_SXM_THERMAL,
        ),
        _gpu(
            "a100-80gb",
            "NVIDIA-A100-SXM4-80GB",
            81920,
            "ampere",
            mig_profiles=_A100_80_MIG,
            gke_accelerator="nvidia-a100-80gb",
            thermal=_SXM_THERMAL,
        ),
        _gpu(
            "l4",
            "NVIDIA-L4",
            23034,
            "ada-lovelace",
            gke_accelerator="nvidia-l4",
            thermal=_PCIE_THERMAL,
        ),
        _gpu("a10g", "NVIDIA-A10G", 23028, "ampere", thermal=_PCIE_THERMAL),
        _gpu(
            "t4",
            "Tesla-T4",
            15360,
            "turing",
            gke_accelerator="nvidia-tesla-t4",
            thermal=_PCIE_THERMAL,
        ),
        _gpu("a10", "NVIDIA-A10", 23028, "ampere", thermal=_PCIE_THERMAL),
        _gpu(
            "v100-16gb",
            "Tesla-V100-SXM2-16GB",
            16384,
            "volta",
            gke_accelerator="nvidia-tesla-v100",
            thermal=_SXM_THERMAL,
        ),
        _gpu("v100-32gb", "Tesla-V100-SXM2-32GB", 32768, "volta", thermal=_SXM_THERMAL),
        _gpu(
            "p100",
            "Tesla-P100-PCIE-16GB",
            16384,
            "pascal",
            gke_accelerator="nvidia-tesla-p100",
            thermal=_PCIE_THERMAL,
        ),
        # Alibaba's trace names two GPU models only G2 and G3 (not disclosed); their label
        # values are the replay's own. No thermal lines: their limits are not published.
        _gpu("alibaba-g2", "Alibaba-G2", 0, ""),
        _gpu("alibaba-g3", "Alibaba-G3", 0, ""),
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


@dataclass(frozen=True, kw_only=True)
class TpuSliceShapes:
    """The slice topologies GKE offers for one TPU model, and the machine types that carry them.

    topologies: topology -> machine types whose nodes may form a slice of that shape; empty
        when the docs give no closed list for the model (then only the dimension rule below
        and the chips-per-host arithmetic are checked).
    dims_all_at_most_4_or_all_multiples_of_4: the dimensions of a topology are either all at
        most 4 or all multiples of 4 (the docs' rule for TPU v4).
    source: where the facts come from.
    """

    topologies: dict[str, tuple[str, ...]] = field(default_factory=dict)
    dims_all_at_most_4_or_all_multiples_of_4: bool = False
    source: str

    def machine_types_for(self, topology: str) -> tuple[str, ...]:
        return self.topologies.get(topology, ())


def _shapes(
    single_host: dict[str, tuple[str, ...]], multi_host: str, *shapes: str
) -> dict[str, tuple[str, ...]]:
    """Topology -> machine types: `single_host` as given, plus `multi_host` for each of
    `shapes` (a shape may be in both, as 2x4 is: one 8-chip host or two 4-chip hosts)."""
    out = dict(single_host)
    for shape in shapes:
        out[shape] = (*out.get(shape, ()), multi_host)
    return out


_MULTI_HOST_2D = ("2x4", "4x4", "4x8", "8x8", "8x16", "16x16")
"""The 2-D slices v5e and v6e build from 4-chip hosts (2x4 also fits one 8-chip host)."""

TPU_SLICE_SHAPES: dict[str, TpuSliceShapes] = {
    # TPU v5e, "Configurations": the 2-D slice shapes are 1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16
    # and 16x16; serving (single-host) machine types are ct5lp-hightpu-1t (1x1), -4t (2x2) and
    # -8t (2x4) (https://cloud.google.com/tpu/docs/v5e). A ct5lp-hightpu-4t 2x2 pool is
    # single-host (https://cloud.google.com/kubernetes-engine/docs/how-to/tpu-multislice);
    # GKE builds 2x4 and larger slices from ct5lp-hightpu-4t hosts (Google's xpk,
    # src/xpk/core/system_characteristics.py: v5litepod 2x4..16x16 on ct5lp-hightpu-4t).
    "tpu-v5e": TpuSliceShapes(
        topologies=_shapes(
            {
                "1x1": ("ct5lp-hightpu-1t",),
                "2x2": ("ct5lp-hightpu-4t",),
                "2x4": ("ct5lp-hightpu-8t",),
            },
            "ct5lp-hightpu-4t",
            *_MULTI_HOST_2D,
        ),
        source="cloud.google.com/tpu/docs/v5e; GKE tpu-multislice; xpk system_characteristics",
    ),
    # TPU v6e, "Supported configurations": 1x1 ct6e-standard-1t, 2x2 ct6e-standard-4t, 2x4
    # ct6e-standard-8t (1 VM) or ct6e-standard-4t (2 VMs, GKE API only), 4x4 to 16x16
    # ct6e-standard-4t (https://cloud.google.com/tpu/docs/v6e).
    "tpu-v6e": TpuSliceShapes(
        topologies=_shapes(
            {
                "1x1": ("ct6e-standard-1t",),
                "2x2": ("ct6e-standard-4t",),
                "2x4": ("ct6e-standard-8t",),
            },
            "ct6e-standard-4t",
            *_MULTI_HOST_2D,
        ),
        source="cloud.google.com/tpu/docs/v6e",
    ),
    # TPU v4: topologies are "AxBxC where A<=B<=C and A, B, C are either all <= 4 or all
    # integer multiples of 4" (https://cloud.google.com/tpu/docs/types-topologies). No closed
    # list is given, and GKE itself names the single-host shape 2x2x1, so the ordering is not
    # enforced. One machine type, ct4p-hightpu-4t (4 chips per host).
    "tpu-v4": TpuSliceShapes(
        dims_all_at_most_4_or_all_multiples_of_4=True,
        source="cloud.google.com/tpu/docs/types-topologies",
    ),
    # TPU v5p: the docs list only "the most common" slice shapes (2x2x1 ... 16x16x24, the
    # largest; https://cloud.google.com/tpu/docs/supported-tpu-configurations), not a rule or
    # a closed list, so no shape check beyond 3 dimensions and whole hosts of
    # ct5p-hightpu-4t (4 chips each).
    "tpu-v5p": TpuSliceShapes(source="cloud.google.com/tpu/docs/supported-tpu-configurations"),
}
"""Slice shapes per TPU model (keys of `MODELS`); every TPU model has an entry."""


# ---------------------------------------------------------------------------------------------
# Carbon intensity of the grid, per cloud region
# ---------------------------------------------------------------------------------------------

CARBON_INTENSITY_SOURCE = (
    "Google Cloud, region-carbon-info, data/yearly/2023.csv (github.com/GoogleCloudPlatform/"
    "region-carbon-info): yearly average location-based grid carbon intensity, gCO2eq/kWh, "
    "hourly grid mix from Electricity Maps"
)
"""Where the default grid carbon intensities come from."""

CARBON_INTENSITY_G_PER_KWH: dict[str, float] = {
    # GCP regions, as published (2023).
    "us-central1": 430,
    "us-east1": 560,
    "us-east4": 322,
    "us-east5": 322,
    "us-south1": 321,
    "us-west1": 94,
    "us-west2": 198,
    "us-west3": 588,
    "us-west4": 373,
    "northamerica-northeast1": 2,
    "northamerica-northeast2": 47,
    "europe-north1": 46,
    "europe-west1": 122,
    "europe-west2": 136,
    "europe-west3": 345,
    "europe-west4": 236,
    "europe-west6": 59,
    "europe-west9": 34,
    "europe-central2": 723,
    "asia-east1": 451,
    "asia-northeast1": 459,
    "asia-southeast1": 369,
    "asia-south1": 648,
    "australia-southeast1": 501,
    # AWS regions: the figure of the Google region on the same grid (same metro area and
    # Electricity Maps zone); none is published by AWS itself.
    "us-east-1": 322,  # Northern Virginia (PJM), as us-east4
    "us-east-2": 322,  # Ohio (PJM), as us-east5 Columbus
    "us-west-2": 94,  # Oregon (BPA), as us-west1
    "eu-central-1": 345,  # Frankfurt, as europe-west3
    "eu-west-2": 136,  # London, as europe-west2
    "eu-west-3": 34,  # Paris, as europe-west9
    "ap-northeast-1": 459,  # Tokyo, as asia-northeast1
    "ap-southeast-1": 369,  # Singapore, as asia-southeast1
    "ap-south-1": 648,  # Mumbai, as asia-south1
}
"""Default grid carbon intensity (gCO2eq/kWh) per region; see `CARBON_INTENSITY_SOURCE`. A
stack overrides or adds regions with `observability.carbon_intensity_g_per_kwh`."""

WORLD_CARBON_INTENSITY_G_PER_KWH = 480.0
"""For a region without a figure (and local clusters): the world average of 2023, 480
gCO2/kWh (Ember, Global Electricity Review 2024)."""
