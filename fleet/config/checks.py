"""The semantic pass: problems across fields of a structurally valid configuration (unknown
accelerator models, quotas beyond what the pools can hold, spot-only pools for budget-exempt
work, TPU topologies that do not fit the machine type, duplicate names), each collected with its
path instead of stopping at the first."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from fleet import catalog, labels
from fleet.config.clusters import ClusterConfig, PoolConfig
from fleet.config.errors import Problem
from fleet.config.schema import FleetConfig
from fleet.placement import service_image
from fleet.problems import grace_longer_than_window


def check_fleet(config: FleetConfig) -> list[Problem]:
    """Every cross-field problem of a structurally valid configuration, in document order."""
    problems: list[Problem] = []

    def add(path: str, reason: str) -> None:
        problems.append(Problem(path=path, reason=reason))

    _check_duplicates(config, add)
    _check_one_preemptor(config, add)
    _check_models(config, add)
    _check_clusters(config, add)
    _check_workload_types(config, add)
    _check_teams(config, add)
    _check_approvals(config, add)
    _check_settings(config, add)
    _check_cloud_upgrades(config, add)
    return problems


RESERVED_LABEL_DOMAINS = ("fleetplane.dev", "kubernetes.io", "k8s.io", "cloud.google.com")


def _duplicates(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    dups: list[str] = []
    for name in names:
        if name in seen and name not in dups:
            dups.append(name)
        seen.add(name)
    return dups


def _check_duplicates(config: FleetConfig, add: Any) -> None:
    for name in _duplicates(c.name for c in config.clusters):
        add(f"clusters[{name}]", f"duplicate cluster name {name!r}")
    for name in _duplicates(p.name for p in config.pools):
        add(f"pools[{name}]", f"duplicate pool name {name!r} (pool names are unique in the fleet)")
    for name in _duplicates(t.name for t in config.teams):
        add(f"teams[{name}]", f"duplicate team name {name!r}")
    owners: dict[str, str] = {}
    for team in config.teams:
        for ns in team.effective_namespaces:
            if ns in owners:
                add(
                    f"teams[{team.name}].namespaces",
                    f"namespace {ns!r} already belongs to team {owners[ns]!r}",
                )
            else:
                owners[ns] = team.name
    reserved = {"default", *config.system_namespaces()}
    for team in config.teams:
        for ns in team.effective_namespaces:
            if ns in reserved:
                add(
                    f"teams[{team.name}].namespaces",
                    f"namespace {ns!r} is reserved for the platform",
                )
        if team.name in {"default", "root"}:
            add(f"teams[{team.name}].name", f"{team.name!r} is a reserved Volcano queue name")
    for name in _duplicates(pc.name for pc in config.priority_classes()):
        add("workload_types", f"priority class {name!r} is declared by more than one workload type")


EVICTING_VOLCANO_ACTIONS = ("preempt", "reclaim")
"""Volcano actions that evict running pods on the scheduler's own judgement."""


def _check_one_preemptor(config: FleetConfig, add: Any) -> None:
    """Exactly one component decides who loses accelerators: the controller, which checks
    checkpoints and asks OPA. kube-scheduler (PreemptLowerPriority) and Volcano (preempt,
    reclaim) would evict before it, blind to both."""
    for name, workload_type in config.workload_types.items():
        for pc in workload_type.priority_classes:
            if pc.preemption_policy != "Never":
                add(
                    f"workload_types.{name}.priority_classes[{pc.name}].preemption_policy",
                    "must be Never: the controller is the one preemptor (kube-scheduler would "
                    "evict before its checkpoint-aware, OPA-gated choice)",
                )
    for action in config.volcano.actions:
        if action in EVICTING_VOLCANO_ACTIONS:
            add(
                "volcano.actions",
                f"{action!r} is refused: Volcano would evict on its own, and the controller is "
                "the one preemptor (use enqueue, allocate, backfill)",
            )


def _check_models(config: FleetConfig, add: Any) -> None:
    known = ", ".join(sorted(catalog.MODELS))
    for name in config.models:
        if name not in catalog.MODELS:
            add(f"models[{name}]", f"unknown accelerator model {name!r} (known: {known})")


def _check_clusters(config: FleetConfig, add: Any) -> None:
    team_names = {t.name for t in config.teams}
    for cluster in config.clusters:
        at = f"clusters[{cluster.name}]"
        if cluster.provider == "aws":
            for field, value in (
                ("region", cluster.region),
                ("node_role_arn", cluster.node_role_arn),
                ("subnet_ids", cluster.subnet_ids),
            ):
                if not value:
                    add(f"{at}.{field}", "required for provider aws")
        if cluster.provider == "gcp":
            for field, value in (("region", cluster.region), ("project", cluster.project)):
                if not value:
                    add(f"{at}.{field}", "required for provider gcp")
        for pool in cluster.pools:
            _check_pool(config, cluster, pool, f"{at}.pools[{pool.name}]", team_names, add)
        check_autoscaling(cluster, at, add)


def _check_pool(
    config: FleetConfig,
    cluster: ClusterConfig,
    pool: PoolConfig,
    at: str,
    team_names: set[str],
    add: Any,
) -> None:
    model = catalog.MODELS.get(pool.model)
    if model is None:
        known = ", ".join(sorted(catalog.MODELS))
        add(f"{at}.model", f"unknown accelerator model {pool.model!r} (known: {known})")
    elif pool.model not in config.models:
        add(f"{at}.model", f"model {pool.model!r} has no entry in models (prices)")

    machine = catalog.MACHINE_TYPES.get(pool.machine_type)
    if machine is None:
        if pool.accelerators_per_node is None:
            add(
                f"{at}.machine_type",
                f"unknown machine type {pool.machine_type!r}: set accelerators_per_node",
            )
    else:
        if cluster.provider != "local" and machine.cloud != cluster.provider:
            add(
                f"{at}.machine_type",
                f"{pool.machine_type!r} is a machine type of {machine.cloud}, "
                f"but cluster {cluster.name!r} is on {cluster.provider}",
            )
        if model is not None and machine.model != pool.model:
            add(
                f"{at}.machine_type",
                f"{pool.machine_type!r} carries {machine.model}, not {pool.model}",
            )
        if pool.accelerators_per_node not in (None, machine.accelerators):
            add(
                f"{at}.accelerators_per_node",
                f"{pool.machine_type!r} has {machine.accelerators} accelerators per node, "
                f"not {pool.accelerators_per_node}",
            )

    if pool.min_nodes > pool.max_nodes:
        add(f"{at}.min_nodes", f"min_nodes {pool.min_nodes} is above max_nodes {pool.max_nodes}")
    for team in pool.teams:
        if team not in team_names:
            add(f"{at}.teams", f"unknown team {team!r}")
    for key in pool.labels:
        domain = key.split("/")[0] if "/" in key else ""
        if domain in RESERVED_LABEL_DOMAINS or domain.endswith(
            tuple(f".{d}" for d in RESERVED_LABEL_DOMAINS)
        ):
            add(f"{at}.labels[{key}]", f"{domain} labels are set by the platform or the cloud")

    if model is None:
        return
    if model.is_tpu:
        if cluster.provider == "aws":
            add(f"{at}.model", f"{pool.model} is a TPU: TPU pools need a gcp or local cluster")
        _check_tpu_pool(pool, model, at, add)
        if pool.mig_profile is not None:
            add(f"{at}.mig_profile", f"{pool.model} is a TPU: MIG does not apply")
        if pool.gpu_sharing is not None:
            add(f"{at}.gpu_sharing", f"{pool.model} is a TPU: GPU sharing does not apply")
    else:
        if pool.tpu_topology is not None:
            add(f"{at}.tpu_topology", f"{pool.model} is a GPU: a TPU topology does not apply")
        if pool.mig_profile is not None and pool.mig_profile not in model.mig_profiles:
            supported = ", ".join(model.mig_profiles) or "none: the model has no MIG"
            add(
                f"{at}.mig_profile",
                f"{pool.model} does not support MIG profile {pool.mig_profile!r} (supported: {supported})",
            )
        if cluster.provider == "gcp" and not pool.gke_accelerator:
            add(f"{at}.model", f"{pool.model} is not offered on GKE")


def _check_tpu_pool(pool: PoolConfig, model: catalog.AcceleratorModel, at: str, add: Any) -> None:
    """GKE's rules for a TPU slice node pool: a topology the model offers, on a machine type
    that carries it, in whole hosts; a multi-host pool holds exactly one slice, which GKE
    creates, repairs and scales as one unit (nodes cannot be added to it: more slices take
    more pools), so its node count is the slice's hosts, or 0 when scaled down."""
    topology = pool.tpu_topology
    if topology is None:
        add(f"{at}.tpu_topology", f"required for TPU model {pool.model}")
        return
    chips = catalog.topology_chips(topology)
    dims = topology.split("x")
    if chips is None or len(dims) != model.tpu_topology_dims:
        shape = "x".join(["N"] * model.tpu_topology_dims)
        add(
            f"{at}.tpu_topology",
            f"{topology!r} is not a {pool.model} topology (expected {shape})",
        )
        return
    shapes = catalog.TPU_SLICE_SHAPES.get(pool.model)
    if shapes is not None:
        if shapes.topologies and topology not in shapes.topologies:
            offered = ", ".join(shapes.topologies)
            add(
                f"{at}.tpu_topology",
                f"GKE offers no {topology} slice of {pool.model}; use one of {offered}",
            )
            return
        sizes = [int(d) for d in dims]
        if shapes.dims_all_at_most_4_or_all_multiples_of_4 and not (
            all(d <= 4 for d in sizes) or all(d % 4 == 0 for d in sizes)
        ):
            add(
                f"{at}.tpu_topology",
                f"{topology} is not a {pool.model} topology: its dimensions must be all at "
                "most 4 or all multiples of 4 (e.g. 2x2x4, 4x4x8)",
            )
            return
        carriers = shapes.machine_types_for(topology)
        if carriers and pool.machine_type not in carriers:
            add(
                f"{at}.machine_type",
                f"a {topology} slice of {pool.model} runs on {' or '.join(carriers)}, "
                f"not {pool.machine_type}: change the machine type or the topology",
            )
            return
    per_host = pool.accelerators
    if per_host <= 0:
        return
    if chips % per_host != 0:
        add(
            f"{at}.tpu_topology",
            f"topology {topology} has {chips} chips, not a multiple of the "
            f"{per_host} chips per host of {pool.machine_type}",
        )
        return
    hosts = chips // per_host
    if hosts == 1:
        return
    slice_ = (
        f"a multi-host {topology} slice ({chips} chips, {per_host} per host on "
        f"{pool.machine_type}) is {hosts} nodes and its pool holds exactly one slice"
    )
    if pool.max_nodes != hosts:
        more = " (for more slices, add one pool per slice)" if pool.max_nodes > hosts else ""
        add(f"{at}.max_nodes", f"{slice_}: set max_nodes to {hosts}{more}")
    if pool.min_nodes not in (0, hosts):
        add(
            f"{at}.min_nodes",
            f"{slice_}, scaled as a whole: set min_nodes to 0 or {hosts}",
        )


def _check_workload_types(config: FleetConfig, add: Any) -> None:
    for name, wt in config.workload_types.items():
        if not wt.priority_classes:
            add(
                f"workload_types.{name}.priority_classes", "at least one priority class is required"
            )
        if wt.max_idle_timeout_seconds is not None and wt.idle is None:
            add(
                f"workload_types.{name}.max_idle_timeout_seconds",
                "set, but the type has no idle rule",
            )
        if wt.idle is not None and wt.idle.grace_seconds > wt.idle.window_seconds:
            add(
                f"workload_types.{name}.idle.grace_seconds",
                grace_longer_than_window(wt.idle.grace_seconds, wt.idle.window_seconds),
            )


def _check_teams(config: FleetConfig, add: Any) -> None:
    resources = set(config.accelerator_resources())
    total: dict[str, int] = {}
    for pool in config.pools:
        if pool.model in catalog.MODELS and pool.model in config.models:
            total[pool.resource] = total.get(pool.resource, 0) + pool.capacity
    guaranteed_sum: dict[str, int] = {}

    for team in config.teams:
        at = f"teams[{team.name}]"
        for model in team.allowed_models or []:
            if model not in config.models:
                add(f"{at}.allowed_models", f"unknown model {model!r} (not in models)")
        default = team.default_model
        if default is not None:
            if default not in config.models:
                add(f"{at}.default_model", f"unknown model {default!r} (not in models)")
            elif default not in config.allowed_models(team):
                add(f"{at}.default_model", f"{default!r} is not among the team's allowed models")

        pools = [p for p in config.team_pools(team) if p.model in catalog.MODELS]
        capacity: dict[str, int] = {}
        for pool in pools:
            capacity[pool.resource] = capacity.get(pool.resource, 0) + pool.capacity
        for field, amounts in (("quota", team.quota), ("guaranteed", team.guaranteed)):
            for resource, amount in amounts.items():
                path = f"{at}.{field}[{resource}]"
                if resource not in labels.ACCELERATOR_RESOURCES:
                    known = ", ".join(sorted(labels.ACCELERATOR_RESOURCES))
                    add(path, f"unknown accelerator resource {resource!r} (known: {known})")
                    continue
                if amount < 0:
                    add(path, "must not be negative")
                    continue
                if resource not in resources and amount > 0:
                    add(path, f"no configured model provides {resource}")
                    continue
                if field == "quota" and amount > capacity.get(resource, 0):
                    held = ", ".join(
                        f"{p.name} {p.max_nodes}x{p.allocatable_per_node}"
                        for p in pools
                        if p.resource == resource
                    )
                    add(
                        path,
                        f"quota {amount} exceeds the {capacity.get(resource, 0)} {resource} "
                        f"the team's pools can ever hold ({held or 'no pools'})",
                    )
        for resource, amount in team.guaranteed.items():
            if amount > team.quota.get(resource, 0) and resource in labels.ACCELERATOR_RESOURCES:
                add(
                    f"{at}.guaranteed[{resource}]",
                    f"guarantee {amount} exceeds the team's quota {team.quota.get(resource, 0)}",
                )
            guaranteed_sum[resource] = guaranteed_sum.get(resource, 0) + max(amount, 0)

        for wt_name in team.budget_exempt_types:
            wt = config.workload_types.get(wt_name)
            path = f"{at}.budget_exempt_types"
            if wt is None:
                add(path, f"unknown workload type {wt_name!r}")
                continue
            if not wt.budget_exempt:
                add(path, f"workload type {wt_name!r} is not budget_exempt")
                continue
            if wt.capacity == "on-demand" and not any(
                p.capacity_type == "on-demand" for p in pools
            ):
                names = ", ".join(p.name for p in pools) or "none"
                add(
                    path,
                    f"budget-exempt type {wt_name!r} runs on on-demand capacity only, but every "
                    f"pool team {team.name!r} can use is spot (pools: {names})",
                )

    for resource, amount in guaranteed_sum.items():
        if resource in labels.ACCELERATOR_RESOURCES and amount > total.get(resource, 0):
            add(
                f"teams[*].guaranteed[{resource}]",
                f"guarantees add up to {amount}, more than the {total.get(resource, 0)} "
                f"{resource} in the fleet",
            )


def _check_approvals(config: FleetConfig, add: Any) -> None:
    teams = {team.name for team in config.teams}
    for name in _duplicates(grant.id for grant in config.approvals):
        add("approvals", f"approval id {name!r} is granted more than once")
    for grant in config.approvals:
        if grant.team not in teams:
            add(f"approvals[{grant.id}].team", f"unknown team {grant.team!r}")
        if grant.max_accelerators <= config.approval.threshold_accelerators:
            add(
                f"approvals[{grant.id}].max_accelerators",
                f"{grant.max_accelerators} needs no approval (approval.threshold_accelerators "
                f"is {config.approval.threshold_accelerators})",
            )


def _check_settings(config: FleetConfig, add: Any) -> None:
    if config.budget.warn_ratio > config.budget.deny_ratio:
        add("budget.warn_ratio", "must not be above deny_ratio")
    period = config.controller.period_seconds
    if period % 60 != 0 or 3600 % period != 0:
        add(
            "controller.period_seconds",
            f"{period} is not a whole number of minutes dividing an hour (e.g. 60, 120, 300, 600)",
        )
    if not config.opa.deploy and config.controller.opa_url is None:
        add("controller.opa_url", "required when opa.deploy is false (OPA runs elsewhere)")
    if config.opa.deploy and config.opa.image is None:
        add(
            "opa.image",
            "required with deploy: true: OPA's image by digest (REPOSITORY@sha256:...), as "
            "`fleetplane image build` prints it",
        )
    controller = config.controller
    if config.opa.admission_front.enabled and not config.opa.deploy:
        add(
            "opa.admission_front.enabled",
            "needs the in-cluster OPA (opa.deploy: true): the front writes each reservation to "
            "every replica of its Service",
        )
    if config.opa.admission_front.enabled and controller.image is None:
        add(
            "opa.admission_front.enabled",
            "needs controller.image: the front runs the controller's image (REPOSITORY@sha256:...)",
        )
    if controller.deploy and not controller.suspend and controller.image is None:
        add(
            "controller.image",
            "required for a CronJob that runs: the controller's image by digest "
            "(REPOSITORY@sha256:...), as `fleetplane image build` prints it",
        )
    if controller.deploy and not controller.suspend and config.upgrade.validator_image is None:
        add(
            "upgrade.validator_image",
            "required for a CronJob that runs: the validator pod's image by digest "
            "(REPOSITORY@sha256:..., the `validator` image `fleetplane image build` prints; the "
            "controller's image has no NVML binding)",
        )
    volcano = config.volcano
    if (
        volcano.placement == "fgd"
        and not volcano.placement_url
        and service_image(volcano.placement_image, controller.image) is None
    ):
        add(
            "volcano.placement_image",
            "placement: fgd needs the service's image by digest (by default the controller's, "
            "controller.image, which carries it) or placement_url (a service running elsewhere)",
        )
    gateway = config.observability.pushgateway
    if gateway.deploy and gateway.image is None:
        add(
            "observability.pushgateway.image",
            "required with deploy: true: the Pushgateway's image by digest "
            "(REPOSITORY@sha256:...), as `fleetplane image build` prints it",
        )
    # Only a controller that runs pushes: without one, no Pushgateway is needed anywhere.
    if not gateway.deploy and gateway.url is None and controller.deploy:
        add(
            "observability.pushgateway.url",
            "required when pushgateway.deploy is false (the Pushgateway runs elsewhere)",
        )
    if config.opa.deploy and config.opa.external_url is not None:
        add("opa.external_url", "only with deploy: false (OPA runs outside the cluster)")
    for i, window in enumerate(config.upgrade.maintenance_windows):
        if window.end <= window.start:
            add(f"upgrade.maintenance_windows[{i}].end", "must be after start")


GKE_MIN_WINDOW_MINUTES = 4 * 60
"""GKE counts only contiguous maintenance availability of at least four hours..."""
GKE_MIN_MINUTES_PER_32_DAYS = 48 * 60
"""...and asks for 48 hours of it in any 32 days (GKE: maintenance windows and exclusions)."""
GKE_MAX_EXCLUSIONS = 20


def _check_cloud_upgrades(config: FleetConfig, add: Any) -> None:
    """GKE takes the fleet's windows as one recurring window (a weekly RRULE with BYDAY): only
    windows that share start and end can be said so, and GKE refuses a window below its minimum
    availability. EKS has no window (its node groups change only when the stack changes them)."""
    if not any(c.provider == "gcp" and c.pools for c in config.clusters):
        return
    upgrade = config.upgrade
    windows = upgrade.maintenance_windows
    times = sorted({(w.start, w.end) for w in windows})
    if len(times) > 1:
        said = ", ".join(f"{start}-{end}" for start, end in times)
        add(
            "upgrade.maintenance_windows",
            f"a GKE cluster takes one recurring window, so every window must share start and "
            f"end (here {said}): give one window the days, or use the times they share",
        )
    elif times and windows[0].end > windows[0].start:
        start, end = (_minutes(t) for t in times[0])
        duration = end + 1 - start  # the end is inclusive to the minute
        days = len({day for w in windows for day in w.days})
        # Every weekday occurs at least 4 times in any 32 days.
        if duration < GKE_MIN_WINDOW_MINUTES or 4 * days * duration < GKE_MIN_MINUTES_PER_32_DAYS:
            add(
                "upgrade.maintenance_windows",
                "GKE refuses a maintenance window with less than 48 hours in any 32 days, "
                "counting only stretches of at least 4 hours: lengthen the windows or add days",
            )
    names = _duplicates(f.name for f in upgrade.cloud_freezes)
    for name in names:
        add(f"upgrade.cloud_freezes[{name}]", f"duplicate freeze name {name!r}")
    if len(upgrade.cloud_freezes) > GKE_MAX_EXCLUSIONS:
        add("upgrade.cloud_freezes", f"GKE keeps at most {GKE_MAX_EXCLUSIONS} exclusions")
    for freeze in upgrade.cloud_freezes:
        if freeze.end <= freeze.start:
            add(f"upgrade.cloud_freezes[{freeze.name}].end", "must be after start")


def _minutes(clock: str) -> int:
    hours, minutes = clock.split(":")
    return int(hours) * 60 + int(minutes)


def check_autoscaling(cluster: ClusterConfig, at: str, add: Any) -> None:
    """The choice of autoscaler for one cluster: Karpenter runs on EKS (its AWS provider) and on
    the local fleet (its KWOK provider), not on GKE, where pools scale with GKE's own
    autoscaler. Karpenter's accelerated AMIs carry the NVIDIA driver, so its EKS pools are
    `driver_manager: cloud`."""
    for pool in cluster.pools:
        if pool.autoscaler is None and cluster.autoscaler == "managed":
            continue
        where = f"{at}.pools[{pool.name}].autoscaler" if pool.autoscaler else f"{at}.autoscaler"
        if cluster.autoscaler_for(pool) != "karpenter":
            continue
        if cluster.provider == "gcp":
            add(
                where,
                "karpenter runs on aws and local clusters; GKE pools scale with GKE's "
                "autoscaler (autoscaler: managed, min_nodes/max_nodes)",
            )
        elif pool.accelerator.is_tpu:
            add(where, "karpenter scales GPU pools only; TPU pools are GKE node pools")
        elif cluster.provider == "aws" and pool.driver_manager == "gpu-operator":
            add(
                f"{at}.pools[{pool.name}].driver_manager",
                "karpenter's EKS nodes boot the accelerated AMI, whose image ships the NVIDIA "
                "driver: use driver_manager cloud (or autoscaler: managed)",
            )
