"""The platform's own parts: the GPU Operator and Volcano releases, the OPA gate, the controller's
CronJob, and observability (Pushgateway, rules, dashboards, report)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from fleet import catalog
from fleet.config.base import ConfigModel, ImageByDigest, Name, NamespaceName
from fleet.opa import OPA_MEMORY_MIB
from fleet.placement import service_image

Placement = Literal["volcano", "fgd"]


class GpuOperatorConfig(ConfigModel):
    """The NVIDIA GPU Operator Helm release."""

    chart_version: str = "v25.3.0"
    """Pinned chart version. Default v25.3.0."""
    repository: str = "https://helm.ngc.nvidia.com/nvidia"
    """Chart repository. Default NVIDIA NGC."""
    namespace: NamespaceName = "gpu-operator"
    """Namespace of the release. Default gpu-operator."""
    driver_version: str = Field(default="570.124.06", pattern=r"^[0-9]+\.[0-9]+(\.[0-9]+)?$")
    """Pinned NVIDIA driver of every gpu-operator pool; the controller rolls a change out node
    by node (the operator's own auto-upgrade is off). Default 570.124.06."""
    mig_strategy: Literal["single", "mixed"] = "single"
    """How MIG devices are advertised; single keeps `nvidia.com/gpu`. Default single."""
    dcgm_scrape_interval_seconds: int = Field(default=15, ge=1, le=300)
    """How often Prometheus scrapes the DCGM exporter (its ServiceMonitor); the controller
    counts the samples it expects in an idle window from it. Default 15."""


class VolcanoConfig(ConfigModel):
    """The Volcano Helm release and scheduler configuration."""

    chart_version: str = "1.15.1"
    """Pinned chart version; the release the local fleet runs (tools/go/volcano). Default 1.15.1."""
    repository: str = "https://volcano-sh.github.io/helm-charts"
    """Chart repository. Default the Volcano chart repository."""
    namespace: NamespaceName = "volcano-system"
    """Namespace of the release. Default volcano-system."""
    actions: list[str] = Field(default_factory=lambda: ["enqueue", "allocate", "backfill"])
    """Scheduler actions, in order. `preempt` and `reclaim` are refused: they evict running
    pods on Volcano's own judgement, and the controller is the fleet's one preemptor. Default
    enqueue, allocate, backfill."""
    reserve_cpu_per_idle_gpu: float | None = Field(default=None, gt=0)
    """Cores a pod without GPUs must leave idle per idle GPU of the node it goes to (Volcano's
    resource-strategy-fit proportional predicate; its scores stay off). Keeps CPU-only pods
    from taking the CPU that free GPUs need: on the Alibaba trace, 12 left 36-49 % fewer GPUs
    unallocated when the cluster is full (docs/replay.md, pack mode), at the price that a
    CPU-only pod waits while a GPU-only node's idle GPUs hold the CPU it needs. One ratio for
    every node (Volcano's predicate has no other): a pool with fewer cores per GPU takes no
    CPU-only pod while all its GPUs are idle, so set it only where every GPU shape has at least
    this many cores per GPU (docs/replay.md, "A reservation per node shape"). Default None
    (off)."""
    placement: Placement = "volcano"
    """How the scheduler picks a node among those a pod fits on. volcano: its own scores
    (binpack, nodeorder). fgd: the placement service's fragmentation gradient (Weng et al.,
    ATC 2023) through Volcano's `extender` plugin, deciding; Volcano's scores break its ties,
    and decide alone while the service is down or slow (docs/placement.md). Default fgd when
    the service is at hand: its image (`placement_image`, else `controller.image`, which
    carries it) or a `placement_url`; volcano otherwise (a fleet without either has no service
    to call). Written explicitly, either keeps its meaning."""
    placement_image: ImageByDigest | None = None
    """The placement service's image by digest, for `placement: fgd` (a Deployment and Service
    in the release's namespace). Default None: the controller's image (`controller.image`),
    which `fleetplane image build` builds with the service in it (`fleetplane-placement`); an
    image of its own must run the service as its `/usr/local/bin/fleetplane-placement`."""
    placement_url: str | None = Field(default=None, pattern=r"^https?://[^/]+/?$")
    """With `placement: fgd`, the base URL of a placement service that runs elsewhere (the
    local fleet's, on loopback): no Deployment is declared, the scheduler calls this URL.
    Default None."""


def with_default_placement(volcano: VolcanoConfig, controller_image: str | None) -> VolcanoConfig:
    """The validated `volcano` section with `placement` resolved where it is not written: fgd
    when the placement service is at hand (its image, `placement_image` or else
    `controller.image`, which carries it; or a `placement_url`), volcano otherwise. The fleet
    applies it once its sections are validated (FleetConfig), since this default depends on
    another section."""
    if "placement" in volcano.model_fields_set:
        return volcano
    at_hand = service_image(volcano.placement_image, controller_image) or volcano.placement_url
    return volcano.model_copy(update={"placement": "fgd" if at_hand else "volcano"})


class AdmissionFrontConfig(ConfigModel):
    """`opa.admission_front`: the admission front (controller/admission_front.py), where the
    API server calls the gate when enabled. It hands each review to OPA and, before it answers,
    writes an allowed accelerator workload's reservation to every OPA replica, so workloads
    admitted together cannot share one budget headroom (issue 33). Opt-in: without it the
    webhook calls OPA directly, and a workload counts against its team from when the
    controller's keeper reserves for its pods."""

    enabled: bool = False
    """Deploy the front and point the webhook at it. Needs the in-cluster OPA (`opa.deploy`)
    and the controller's image (`controller.image`: the front is its `admission-front`
    command). Default false."""
    name: Name = "fleetplane-admission-front"
    """Name of its Deployment, Service, ServiceAccount and Lease. Default
    fleetplane-admission-front."""
    port: int = Field(default=8443, ge=1024, le=65535)
    """HTTPS port it serves on. Default 8443."""
    hold_seconds: int = Field(default=900, ge=60, le=86400)
    """How long an entry counts before it lapses: at least the keeper's refresh and the time
    the workload's controllers take to create its pods. Default 900."""
    lease_seconds: int = Field(default=15, ge=5, le=300)
    """Duration of its Lease: one front judges at a time, and a front that cannot renew stops
    judging before another may take over; a front that dies without giving the Lease back
    leaves the webhook unanswered (refusing) this long at most. Default 15."""


class OpaConfig(ConfigModel):
    """The OPA admission gate."""

    deploy: bool = True
    """Run OPA in the cluster with a validating webhook; false when OPA runs elsewhere (the
    local stack runs it on loopback). Default true."""
    image: ImageByDigest | None = None
    """OPA's image by digest (`REPOSITORY@sha256:...`; `fleetplane image build` builds it from
    the pinned OPA and prints the digest). Required with `deploy: true`. Default None."""
    name: Name = "fleetplane-opa"
    """Name of the Deployment, Service and webhook. Default fleetplane-opa."""
    replicas: int = Field(default=2, ge=1)
    """OPA replicas. Default 2."""
    memory_mib: int = Field(default=OPA_MEMORY_MIB, ge=512)
    """Memory of each OPA replica in MiB, requested and its limit; three quarters of it is the Go
    collector's budget (fleet/opa.py `opa_gc_env`). The documents the controller keeps grow
    with the fleet: 2048 for 100,000 pods kept the gate's latency at 500 decisions/s where an
    empty fleet's is (docs/scale.md). Default 1024."""
    port: int = Field(default=8443, ge=1024, le=65535)
    """HTTPS port of OPA. Default 8443."""
    webhook_path: str = "/"
    """Path the webhook posts AdmissionReviews to; `/` is OPA's default decision
    (`data.system.main`). Default /."""
    failure_policy: Literal["Fail", "Ignore"] = "Fail"
    """What the API server does when OPA does not answer. Fail: no namespace but the platform's
    own (`system_namespaces`, outside the webhook's scope, so the cluster itself keeps
    working) admits anything unchecked. Default Fail."""
    webhook_timeout_seconds: int = Field(default=5, ge=1, le=30)
    """Webhook timeout. Default 5."""
    cert_validity_days: int = Field(default=825, ge=1)
    """Validity of the generated serving certificate. Default 825."""
    anonymous_webhook: bool = True
    """Whether requests without a bearer token may ask for admission decisions (and nothing
    else: policies/system/authz.rego). The API server of a managed control plane (EKS, GKE)
    calls webhooks without credentials, so true there; false where the API server presents a
    token (a self-managed control plane's AdmissionConfiguration). Default true."""
    external_url: str | None = Field(default=None, pattern=r"^https://[^/:]+:[0-9]+/?$")
    """With `deploy: false`, the HTTPS base URL (`https://HOST:PORT`) of an OPA that serves
    outside the cluster but where the API server reaches it. The gate then declares its
    policies, data, serving certificate (for HOST) and the webhook calling this URL, but no
    Deployment or Service; whatever runs that OPA loads it from those objects (the local
    stack: `fleetplane`, on loopback). None with `deploy: false`: no admission
    gate at all. Default None."""
    admission_front: AdmissionFrontConfig = Field(default_factory=AdmissionFrontConfig)
    """The admission front, opt-in (`enabled`). Default see `AdmissionFrontConfig`."""

    @property
    def external_host(self) -> str | None:
        """HOST of `external_url`."""
        if self.external_url is None:
            return None
        return self.external_url.removeprefix("https://").split(":", 1)[0]

    @property
    def external_port(self) -> int | None:
        """PORT of `external_url`."""
        if self.external_url is None:
            return None
        return int(self.external_url.rstrip("/").rsplit(":", 1)[1])

    @property
    def gate(self) -> bool:
        """Whether the admission gate (webhook, policies, data) is declared at all."""
        return self.deploy or self.external_url is not None


class ControllerConfig(ConfigModel):
    """The runtime controller and its CronJob."""

    deploy: bool = True
    """Declare the CronJob (with its RBAC). Default true."""
    suspend: bool = False
    """Declare the CronJob suspended, so nothing in the cluster runs it (the local stack runs
    the controller on the host; its ServiceAccount and RBAC still exist). Default false."""
    image: ImageByDigest | None = None
    """The controller's image by digest (`REPOSITORY@sha256:...`, as `fleetplane image build`
    prints it). Required unless the CronJob is suspended or not declared. Default None."""
    period_seconds: int = Field(default=300, ge=60, le=3600)
    """Time between reconciles; a whole number of minutes dividing an hour. Default 300."""
    preemption_pending_seconds: int = Field(default=600, ge=0)
    """A higher-priority workload pending this long may preempt. Default 600."""
    prometheus_url: str = "http://prometheus-operated.monitoring.svc:9090"
    """Prometheus with the DCGM series. Default the in-cluster prometheus-operated service."""
    opa_url: str | None = None
    """OPA base URL; None for the in-cluster OPA Service (https). Default None."""
    opa_ca_file: str | None = None
    """CA bundle to verify OPA; None for the mounted CA of the in-cluster OPA. Default None."""
    opa_token_file: str | None = None
    """File holding the controller's bearer token for OPA; None for the token the CronJob
    mounts from the gate's Secret. Default None."""
    dry_run: bool = False
    """Decide and log, but do not act. Default false."""
    lease_name: Name = "fleetplane-controller"
    """Lease that keeps two reconciles from overlapping. Default fleetplane-controller."""
    resident: bool = False
    """Run the reconcile passes in the admission keeper's Deployment (`fleetplane controller
    reconcile --watch`), which lists pods and nodes once and keeps them by watch, instead of a
    CronJob whose every run lists the whole fleet: at 10,000 nodes and 100,000 pods a pass took
    3.5 s there against 6-7 s as a CronJob's run (docs/scale.md). The reconcile CronJob is then not
    declared; the upgrade and health CronJobs are as before. Default false."""


class PushgatewayConfig(ConfigModel):
    """Where each controller pass pushes its metrics (Prometheus Pushgateway)."""

    deploy: bool = True
    """Run a Pushgateway in the system namespace (Deployment, Service, ServiceMonitor); false
    when one runs elsewhere (the local stack runs it on loopback). Default true."""
    image: ImageByDigest | None = None
    """The Pushgateway's image by digest (`REPOSITORY@sha256:...`; `fleetplane image build` builds
    it from the pinned binary, like OPA's). Required with `deploy: true`. Default None."""
    url: str | None = None
    """Base URL the controller pushes to; None for the in-cluster Service. Default None."""


class ObservabilityConfig(ConfigModel):
    """Controller metrics, the alert and recording rules, the dashboards and the chargeback
    report. Thresholds here are the alerts' (observability/rules.yaml reads them)."""

    pushgateway: PushgatewayConfig = Field(default_factory=PushgatewayConfig)
    """Default see `PushgatewayConfig`."""
    prometheus_operator: bool = True
    """Declare the PrometheusRule, the ServiceMonitor of the Pushgateway and the dashboards'
    ConfigMaps (kube-prometheus-stack's CRDs and Grafana sidecar must be installed); false for
    a cluster without them (the local stack loads the same rules into its own Prometheus).
    Default true."""
    namespace: NamespaceName = "monitoring"
    """Namespace of kube-prometheus-stack, where the dashboards' ConfigMaps go. Default
    monitoring."""
    rule_labels: dict[str, str] = Field(
        default_factory=lambda: {"release": "kube-prometheus-stack"}
    )
    """Labels of the PrometheusRule and ServiceMonitor, matching the Prometheus' rule and
    monitor selectors. Default release=kube-prometheus-stack."""
    idle_gpus_alert: int = Field(default=8, ge=1)
    """A team with at least this many GPUs idle (judged by the controller) for
    `idle_alert_for_seconds` fires FleetplaneTeamGpusIdle. Default 8."""
    idle_alert_for_seconds: int = Field(default=1800, ge=0)
    """How long the idle GPUs must stay above the line. Default 1800."""
    hot_gpu_celsius: float = Field(default=85, gt=0)
    """GPU temperature that fires FleetplaneGpuHot (the health check's line too). Default 85."""
    queue_wait_target_seconds: float = Field(default=900, gt=0)
    """Target of a team's p95 wait for accelerators (pending to running); above it for an hour
    fires FleetplaneQueueWaitHigh. Default 900."""
    inference_availability_target: float = Field(default=0.999, gt=0, le=1)
    """Share of the time production inference replicas should be running, not pending; the
    report compares against it. Default 0.999."""
    controller_stale_seconds: int = Field(default=1800, ge=60)
    """No successful controller pass for this long fires FleetplaneControllerNotRunning.
    Default 1800."""
    fragmented_gpus_alert_share: float = Field(default=0.1, gt=0, le=1)
    """A pool whose fragmented accelerators (free ones the fleet's typical pods cannot use,
    the controller's `fragmentation` concern) stay above this share of its allocatable ones
    for `fragmented_alert_for_seconds` fires FleetplanePoolGpusFragmented. Default 0.1."""
    fragmented_alert_for_seconds: int = Field(default=1800, ge=0)
    """How long the fragmented share must stay above the line. Default 1800."""
    carbon_intensity_g_per_kwh: dict[str, float] = Field(default_factory=dict)
    """Grid carbon intensity (gCO2eq/kWh) per cluster region, over the catalog's defaults
    (`fleet.catalog.CARBON_INTENSITY_G_PER_KWH`, with their source). Default none."""

    def carbon_intensity(self, region: str) -> tuple[float, str]:
        """gCO2eq/kWh of a region, and where the figure comes from."""
        if region in self.carbon_intensity_g_per_kwh:
            return self.carbon_intensity_g_per_kwh[region], "stack configuration"
        if region in catalog.CARBON_INTENSITY_G_PER_KWH:
            return catalog.CARBON_INTENSITY_G_PER_KWH[region], catalog.CARBON_INTENSITY_SOURCE
        return (
            catalog.WORLD_CARBON_INTENSITY_G_PER_KWH,
            "world average 2023 (Ember, Global Electricity Review 2024): no figure for "
            f"region {region or '(none)'!r}",
        )
