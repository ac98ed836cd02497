"""The fleet's sections of `data.fleetplane.config`: teams, models, workload types, pools, the
approval threshold, budget ratios and the platform's identities. What the gate and the
controller read about who may run what where, and at what price (docs/contracts.md)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Literal

from fleet.contract.codec import at_least, nodes_or_percent, non_negative, positive, rules
from fleet.problems import grace_longer_than_window


def _filled(value: str) -> str | None:
    return None if value else "required"


@dataclass(frozen=True, kw_only=True)
class Team:
    """`teams.<team>`: its namespaces, budget, models and accelerator shares."""

    namespaces: tuple[str, ...] = field(default=())
    """Namespaces of the team (its name when none is configured)."""
    monthly_budget_usd: float = field(metadata=rules(required=True, check=non_negative))
    """The team's monthly budget (required)."""
    allowed_models: tuple[str, ...] = field(default=())
    """Models the team may request. Default none listed."""
    default_model: str | None = field(default=None)
    """The model a request naming none is given. Default None."""
    guaranteed: dict[str, int] = field(default_factory=dict)
    """Accelerator resource -> accelerators guaranteed (every configured resource, 0 if none)."""
    quota: dict[str, int] = field(default_factory=dict)
    """Accelerator resource -> most accelerators the team may hold."""
    budget_exempt_types: tuple[str, ...] = field(default=())
    """Workload types exempt from the budget for this team (when the type allows it)."""
    queue: str | None = field(default=None)
    """The team's Volcano queue (its name)."""


@dataclass(frozen=True, kw_only=True)
class Thermal:
    """`models.<model>.thermal`: a GPU above `hot_c` is cordoned, back below `cool_c` it
    returns (fleet.catalog)."""

    hot_c: float
    cool_c: float

    def problems(self) -> Iterator[tuple[str, str]]:
        if self.cool_c >= self.hot_c:
            yield "cool_c", "must be below hot_c"


@dataclass(frozen=True, kw_only=True)
class Model:
    """`models.<model>`: how nodes of the model are recognised, and its prices."""

    resource: str = field(metadata=rules(required=True, check=_filled))
    """The extended resource (`nvidia.com/gpu`, `google.com/tpu`)."""
    node_label: str = field(metadata=rules(required=True, check=_filled))
    """The node label naming the model."""
    label_value: str = field(metadata=rules(required=True, check=_filled))
    """That label's value on the model's nodes."""
    price_per_hour_usd: dict[str, float] = field(metadata=rules(required=True))
    """Capacity type (`on-demand`, `spot`) -> USD per accelerator-hour."""
    thermal: Thermal | None = field(default=None)
    """Temperature lines of the health machine; None for a model without them."""


@dataclass(frozen=True, kw_only=True)
class IdleRule:
    """`workload_types.<type>.idle`: below `util_threshold_percent` for `window_seconds`, then
    warned, then reclaimable `grace_seconds` after the warning."""

    util_threshold_percent: float = field(default=5.0, metadata=rules(check=non_negative))
    """Utilisation below which a GPU counts as idle. Default 5."""
    window_seconds: int = field(default=3600, metadata=rules(check=positive))
    """How long it must stay idle to be warned. Default 3600."""
    grace_seconds: int = field(default=1800, metadata=rules(check=non_negative))
    """From the warning to the earliest reclaim; at most the window. Default 1800."""

    def problems(self) -> Iterator[tuple[str, str]]:
        if self.grace_seconds > self.window_seconds:
            yield (
                "grace_seconds",
                grace_longer_than_window(self.grace_seconds, self.window_seconds),
            )


Capacity = Literal["any", "spot", "on-demand"]
PodSecurity = Literal["baseline", "restricted"]
DriverManager = Literal["gpu-operator", "cloud"]


@dataclass(frozen=True, kw_only=True)
class WorkloadType:
    """`workload_types.<type>`: every key present after rendering, so policies never guess."""

    max_accelerators: int = field(default=8, metadata=rules(check=at_least(1)))
    """Most accelerators one workload of the type may request. Default 8."""
    capacity: Capacity = field(default="any")
    """Where it may run: `any`, `spot`, `on-demand`. Default any."""
    priority_classes: tuple[str, ...] = field(default=())
    """PriorityClasses the type may use."""
    default_max_runtime_seconds: int | None = field(default=None)
    """Maximum runtime of a workload of the type; None: unbounded. Default None."""
    checkpoint_required_on_spot: bool = field(default=False)
    """Spot workloads of the type must declare a checkpoint location. Default false."""
    budget_exempt: bool = field(default=False)
    """Teams may list the type in `budget_exempt_types`. Default false."""
    preemptible: bool = field(default=True)
    """The controller may preempt it. Default true."""
    min_runtime_seconds: int = field(default=0, metadata=rules(check=non_negative))
    """Protected from preemption this long after start. Default 0."""
    idle: IdleRule | None = field(default=None)
    """When idle work of the type is reclaimed; None: never. Default None."""
    max_idle_timeout_seconds: int | None = field(default=None)
    """Longest idle timeout a workload may declare; None: no limit. Default None."""
    pod_security: PodSecurity = field(default="baseline")
    """The Pod Security Standards level its pods are held to. Default baseline."""
    allow_required_pod_affinity: bool = field(default=False)
    """Its accelerator pods may carry required pod affinity. Default false."""


@dataclass(frozen=True, kw_only=True)
class Pool:
    """`pools.<pool>`: a node pool, as the controller and the gate see it."""

    cluster: str | None = field(default=None)
    model: str | None = field(default=None)
    resource: str | None = field(default=None)
    capacity_type: Literal["spot", "on-demand"] = field(default="on-demand")
    machine_type: str | None = field(default=None)
    accelerators_per_node: int | None = field(default=None)
    allocatable_per_node: int | None = field(default=None)
    """Schedulable units per node (MIG instances and time-shared replicas included)."""
    min_nodes: int = field(default=0)
    max_nodes: int | None = field(default=None)
    max_unavailable: int | str = field(default=1, metadata=rules(check=nodes_or_percent))
    """Nodes that may be out of service at once: an integer or "N%". Default 1."""
    driver_manager: DriverManager | None = field(default=None)
    """Who installs the driver: the GPU Operator (rolled by the controller) or the node image."""
    driver_version: str | None = field(default=None)
    """The driver the GPU Operator installs; None for cloud-managed and TPU pools."""
    teams: tuple[str, ...] = field(default=())
    """Teams allowed on the pool (empty: every team)."""


@dataclass(frozen=True, kw_only=True)
class Approval:
    """`approval`: requests above the threshold need an approval id."""

    threshold_accelerators: int = field(default=32, metadata=rules(check=at_least(1)))
    """Default 32."""


@dataclass(frozen=True, kw_only=True)
class Budget:
    """`budget`: thresholds as fractions of a team's monthly budget."""

    warn_ratio: float = field(default=0.8, metadata=rules(check=positive))
    """Admission warns from this fraction on. Default 0.8."""
    deny_ratio: float = field(default=1.0, metadata=rules(check=positive))
    """Admission denies from this fraction on. Default 1.0."""


@dataclass(frozen=True, kw_only=True)
class Platform:
    """`platform`: who the gate trusts to write the keys only the platform writes."""

    controller_service_account: str | None = field(default=None)
    """The controller's username (`system:serviceaccount:NS:NAME`)."""
    workload_controllers: tuple[str, ...] = field(default=())
    """Controllers that copy judged templates into new objects."""
    admin_groups: tuple[str, ...] = field(default=())
    """Groups of platform admins."""
