"""Render the fleet configuration into the OPA data document (`data.fleetplane.config`).

The shape is the contract in docs/contracts.md. Every default is filled in, so policies and
the controller never guess; the controller reads its own section (`controller`) from the same
document.

    fleetplane render --stack local [--out FILE]
"""

from __future__ import annotations

import dataclasses
from typing import Any, TypeVar, cast

from fleet import catalog, contract
from fleet.config import FleetConfig, PoolConfig, TeamConfig
from fleet.contract import ConfigDocument, encode_document
from fleet.contract.codec import Problems, decode, key_of
from fleet.contract.fleet_sections import DriverManager

T = TypeVar("T")

OPA_CA_MOUNT = "/etc/fleetplane/opa-ca"
"""Where the controller CronJob mounts the CA of the in-cluster OPA."""
OPA_TOKEN_MOUNT = "/etc/fleetplane/opa-token"
"""Where the controller CronJob mounts its bearer token for OPA (the gate's Secret)."""
CONFIG_MOUNT = "/etc/fleetplane/config"
"""Where the controller CronJob mounts the rendered document."""
CONFIG_FILE = "config.json"
PUSHGATEWAY_NAME = "fleetplane-pushgateway"
"""Deployment and Service of the in-cluster Pushgateway."""
PUSHGATEWAY_PORT = 9091
OPA_SERVICE_PORT = 443
"""Port of the in-cluster OPA Service (HTTPS)."""
CONFIG_ENV = "FLEETPLANE_CONFIG"
"""Environment variable naming the rendered document inside the controller container."""
CONTROLLER_NAME = "fleetplane-controller"
"""The controller's ServiceAccount (and CronJob) in the system namespace."""
KUBE_WORKLOAD_CONTROLLERS = (
    "replicaset-controller",
    "deployment-controller",
    "job-controller",
    "cronjob-controller",
    "statefulset-controller",
    "daemon-set-controller",
    "replication-controller",
)
"""kube-controller-manager's controllers that create pods and objects from judged templates
(their service accounts in kube-system, with --use-service-account-credentials)."""
VOLCANO_CONTROLLERS = "volcano-controllers"
"""Volcano's controller manager's ServiceAccount in Volcano's namespace (it makes a PodGroup
from each Volcano Job and plain pod the gate judged)."""


def render_opa_data(config: FleetConfig) -> dict[str, Any]:
    """The document OPA serves as `data.fleetplane.config`."""
    return encode_document(config_document(config))


def config_document(config: FleetConfig) -> ConfigDocument:
    """The typed document (fleet/contract) of a configuration, every default resolved."""
    return ConfigDocument(
        namespaces={ns: team.name for team in config.teams for ns in team.effective_namespaces},
        teams={team.name: _team(config, team) for team in config.teams},
        models={
            name: _model(name, model.price_per_hour_usd) for name, model in config.models.items()
        },
        workload_types={
            name: contract.WorkloadType(
                max_accelerators=wt.max_accelerators,
                capacity=wt.capacity,
                priority_classes=tuple(pc.name for pc in wt.priority_classes),
                default_max_runtime_seconds=wt.default_max_runtime_seconds,
                checkpoint_required_on_spot=wt.checkpoint_required_on_spot,
                budget_exempt=wt.budget_exempt,
                preemptible=wt.preemptible,
                min_runtime_seconds=wt.min_runtime_seconds,
                idle=from_model(contract.IdleRule, wt.idle.model_dump()) if wt.idle else None,
                max_idle_timeout_seconds=wt.max_idle_timeout_seconds,
                pod_security=wt.pod_security,
                allow_required_pod_affinity=wt.allow_required_pod_affinity,
            )
            for name, wt in config.workload_types.items()
        },
        approval=from_model(contract.Approval, config.approval.model_dump()),
        registries=tuple(config.registries),
        platform_repositories=tuple(platform_repositories(config)),
        budget=from_model(contract.Budget, config.budget.model_dump()),
        pools={pool.name: _pool(config, pool) for pool in config.pools},
        # The pools reserved for some teams, with their teams: what the gate's fast path
        # walks instead of every pool (policies/fleetplane/admission/fast.rego).
        reserved_pools={pool.name: tuple(pool.teams) for pool in config.pools if pool.teams},
        upgrade=from_model(contract.Upgrade, config.upgrade.model_dump()),
        health=from_model(contract.Health, config.health.model_dump()),
        lifetime=from_model(contract.Lifetime, config.lifetime.model_dump()),
        gpu_operator=contract.GpuOperator(namespace=config.gpu_operator.namespace),
        system_namespaces=tuple(config.system_namespaces()),
        platform=from_model(contract.Platform, render_platform(config)),
        controller=from_model(contract.Controller, render_controller(config)),
    )


def from_model(cls: type[T], values: dict[str, Any]) -> T:
    """A contract section from a configuration model's values (`model_dump()`), decoded as the
    controller will decode it: a setting of the model the contract lacks, or a value it would
    refuse, is a bug here, not in a cluster."""
    unknown = set(values) - {key_of(f) for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    problems = Problems()
    decoded = decode(cls, values, cls.__name__, problems)
    if unknown or problems.items:
        raise ValueError(
            f"{cls.__name__} does not hold the configuration's values: unknown "
            f"{sorted(unknown)}, {problems.lines()}; add the setting to fleet/contract"
        )
    return decoded


def render_platform(config: FleetConfig) -> dict[str, Any]:
    """Who the gate trusts to write the keys only the platform writes (`config.platform`)."""
    return {
        "controller_service_account": service_account(config.system_namespace, CONTROLLER_NAME),
        "workload_controllers": [
            *(service_account("kube-system", name) for name in KUBE_WORKLOAD_CONTROLLERS),
            "system:kube-controller-manager",
            service_account(config.volcano.namespace, VOLCANO_CONTROLLERS),
            *(
                service_account(*ref.split("/", 1))
                for op in config.enabled_operators()
                for ref in op.service_accounts
            ),
        ],
        "admin_groups": list(config.admin_groups),
    }


def service_account(namespace: str, name: str) -> str:
    """The username a ServiceAccount's requests carry."""
    return f"system:serviceaccount:{namespace}:{name}"


def render_approvals(config: FleetConfig) -> dict[str, Any]:
    """The document OPA serves as `data.fleetplane.approvals`: each granted approval, unbound.
    No `uid` (the gate reads a missing one as unbound): the controller binds an approval to the
    first workload that uses it and keeps the binding in a file OPA merges into this document
    at start (fleet/opa.py APPROVAL_BINDINGS_FILE_KEY); a `uid: null` here would conflict with
    it and keep OPA from starting."""
    return {
        grant.id: {
            "team": grant.team,
            "max_accelerators": grant.max_accelerators,
            "expires_at": grant.expires_at_epoch,
        }
        for grant in config.approvals
    }


def _team(config: FleetConfig, team: TeamConfig) -> contract.Team:
    resources = config.accelerator_resources()
    return contract.Team(
        namespaces=tuple(team.effective_namespaces),
        monthly_budget_usd=team.monthly_budget_usd,
        allowed_models=tuple(config.allowed_models(team)),
        default_model=config.default_model(team),
        guaranteed={r: team.guaranteed.get(r, 0) for r in resources},
        quota={r: team.quota.get(r, 0) for r in resources},
        budget_exempt_types=tuple(team.budget_exempt_types),
        queue=team.name,
    )


def _model(name: str, prices: Any) -> contract.Model:
    model = catalog.MODELS[name]
    thermal = model.thermal
    return contract.Model(
        resource=model.resource,
        node_label=model.node_label,
        label_value=model.label_value,
        price_per_hour_usd=prices.model_dump(by_alias=True),
        thermal=contract.Thermal(hot_c=thermal.hot_c, cool_c=thermal.cool_c) if thermal else None,
    )


def _pool(config: FleetConfig, pool: PoolConfig) -> contract.Pool:
    return contract.Pool(
        cluster=config.cluster_of(pool).name,
        model=pool.model,
        resource=pool.resource,
        capacity_type=pool.capacity_type,
        machine_type=pool.machine_type,
        accelerators_per_node=pool.accelerators,
        allocatable_per_node=pool.allocatable_per_node,
        min_nodes=pool.min_nodes,
        max_nodes=pool.max_nodes,
        max_unavailable=pool.max_unavailable,
        driver_manager=cast(DriverManager, config.driver_manager(pool)),
        driver_version=config.driver_version(pool),
        teams=tuple(pool.teams),
    )


def render_controller(config: FleetConfig) -> dict[str, Any]:
    """The controller's section: its own settings, defaults resolved."""
    settings = config.controller
    opa_url: str
    opa_ca_file: str | None
    opa_service: str | None
    if settings.opa_url is None:
        # The in-cluster OPA Service (HTTPS on 443), verified with the CA the CronJob mounts.
        # Its replicas each keep their own data, so spend goes to every ready one of them
        # (found through the Service's EndpointSlices), not through the Service.
        opa_url = f"https://{config.opa.name}.{config.system_namespace}.svc:{OPA_SERVICE_PORT}"
        opa_ca_file = settings.opa_ca_file or f"{OPA_CA_MOUNT}/ca.crt"
        opa_service = f"{config.system_namespace}/{config.opa.name}"
    else:
        opa_url = settings.opa_url
        opa_ca_file = settings.opa_ca_file
        opa_service = None
    # The gate's OPA requires a token (components/policy_gate.py); the CronJob mounts it.
    opa_token_file = settings.opa_token_file or (
        f"{OPA_TOKEN_MOUNT}/token" if config.opa.gate else None
    )
    return {
        "period_seconds": settings.period_seconds,
        "schedule": cron_schedule(settings.period_seconds),
        "preemption_pending_seconds": settings.preemption_pending_seconds,
        "scrape_interval_seconds": config.gpu_operator.dcgm_scrape_interval_seconds,
        "prometheus_url": settings.prometheus_url,
        "opa_url": opa_url,
        "opa_ca_file": opa_ca_file,
        "opa_service": opa_service,
        "opa_token_file": opa_token_file,
        "opa_data_configmap": opa_data_configmap(config),
        "dry_run": settings.dry_run,
        "lease_name": settings.lease_name,
        "namespace": config.system_namespace,
        "image": settings.image,
        "pushgateway_url": pushgateway_url(config),
    }


def opa_controller_token_secret(config: FleetConfig) -> str:
    """The Secret holding the controller's bearer token for the gate's OPA (system namespace)."""
    return f"{config.opa.name}-controller-token"


def opa_data_configmap(config: FleetConfig) -> str | None:
    """The ConfigMap ("namespace/name") where the controller keeps the documents OPA loads at
    start (fleet/opa.py CONTROLLER_DATA_FILES); None without an admission gate."""
    if not config.opa.gate:
        return None
    return f"{config.system_namespace}/{config.opa.name}-controller-data"


def opa_authz_secret(config: FleetConfig) -> str:
    """The Secret holding `data.fleetplane.authz` (token hashes and roles) that OPA loads."""
    return f"{config.opa.name}-authz"


def platform_repositories(config: FleetConfig) -> list[str]:
    """The repositories of the platform's own images (the controller's and OPA's), which the
    gate admits only by digest (policies/fleetplane/admission/platform_images.rego)."""
    from fleet.config import IMAGE_BY_DIGEST

    found = set()
    for image in (config.controller.image, config.opa.image):
        match = IMAGE_BY_DIGEST.match(image or "")
        if match:
            found.add(match.group("repository"))
    return sorted(found)


def pushgateway_url(config: FleetConfig) -> str:
    """Where the controller pushes each pass's metrics: the configured URL, else the
    in-cluster Pushgateway Service."""
    gateway = config.observability.pushgateway
    if gateway.url is not None:
        return gateway.url
    return f"http://{PUSHGATEWAY_NAME}.{config.system_namespace}.svc:{PUSHGATEWAY_PORT}"


def cron_schedule(period_seconds: int) -> str:
    """The CronJob schedule for a period of whole minutes dividing an hour."""
    minutes = period_seconds // 60
    return "* * * * *" if minutes == 1 else f"*/{minutes} * * * *" if minutes < 60 else "0 * * * *"
