"""The placement service's declaration: its names, port and the scheduler tiers that call it.

The service (placement/) scores Volcano's candidate nodes for a task by the fragmentation
gradient; vc-scheduler calls it through its `extender` plugin
(volcano.sh/volcano pkg/scheduler/plugins/extender). Declaration only, without numpy: the
components declare the Deployment from it and fleet.volcano adds the tiers with it, and the
service reads the same names.
"""

from __future__ import annotations

import copy
from typing import Any, Final, Protocol

NAME: Final = "fleetplane-placement"
"""Name of the Deployment, Service, ServiceAccount and the metrics' job."""
PORT: Final = 8080
"""HTTP port of the service (plain HTTP inside the cluster, as Volcano's extender speaks)."""
PRIORITIZE_VERB: Final = "prioritize"
"""Path of the batch node scores (`extender.prioritizeVerb`)."""
HEALTH_PATH: Final = "/healthz"
METRICS_PATH: Final = "/metrics"
HTTP_TIMEOUT: Final = "500ms"
"""`extender.httpTimeout`: past it Volcano scores the task without the service (it is
`ignorable`). A call over the trace's 1,213 nodes takes well under it (docs/placement.md)."""


def placement_slow_seconds() -> float:
    """Answers slower than this are near Volcano's timeout (80 % of it): the alert's line."""
    return 0.8 * float(HTTP_TIMEOUT.removesuffix("ms")) / 1000


SCORE_SCALE: Final = 10_000
"""One rank of the service's answer (placement.points: FGD's order, then best fit) is worth
this much in Volcano's sum: more than everything the shipped plugins add together (binpack at
most 1,000, nodeorder about 500), so the service decides and the shipped scores only break
its exact ties."""
GPU_SHARE_ANNOTATION: Final = "fleetplane.dev/gpu-milli"
"""On a pod that shares one GPU (time-slicing, which Volcano does not see): its share in
milli-GPUs (1-999). The service scores such a pod by the GPU it would share and counts the
shares of pods already on a node."""
EXTENDER: Final = "extender"


def service_url(namespace: str) -> str:
    """The in-cluster URL of the service in the platform's namespace."""
    return f"http://{NAME}.{namespace}.svc:{PORT}"


def extender_arguments(url: str, *, timeout: str = HTTP_TIMEOUT) -> dict[str, Any]:
    """The extender plugin's arguments: batch node scores only, ignorable (a service that is
    down or slower than `timeout` leaves Volcano's own scores), and no `managedResources`:
    CPU-only pods must be scored too, since where they go is what strands GPUs."""
    return {
        "extender.urlPrefix": url,
        "extender.httpTimeout": timeout,
        "extender.prioritizeVerb": PRIORITIZE_VERB,
        "extender.ignorable": True,
    }


def with_extender(tiers: list[dict[str, Any]], url: str) -> list[dict[str, Any]]:
    """A copy of the tiers with the extender plugin at the end of the last tier (where the
    node-scoring plugins are)."""
    out = copy.deepcopy(tiers)
    plugins = out[-1].setdefault("plugins", [])
    plugins[:] = [p for p in plugins if p.get("name") != EXTENDER]
    plugins.append({"name": EXTENDER, "arguments": extender_arguments(url)})
    return out


ENTRYPOINT: Final = "/usr/local/bin/fleetplane-placement"
"""Where the service's image runs it (images/build.py puts it in the controller's image)."""


def service_image(placement_image: str | None, controller_image: str | None) -> str | None:
    """The service's image: `volcano.placement_image` when given, else the controller's, which
    carries the service (`fleetplane image build`)."""
    return placement_image or controller_image


class PlacementSettings(Protocol):
    """What of `volcano` (fleet.config.VolcanoConfig) the tiers depend on; a protocol, so that
    the service, which reads this module, does not load the configuration model."""

    @property
    def placement(self) -> str: ...
    @property
    def placement_url(self) -> str | None: ...
    @property
    def namespace(self) -> str: ...


def placement_tiers(
    settings: PlacementSettings, tiers: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The scheduler tiers with the extender when `volcano.placement` is fgd, calling
    `volcano.placement_url` or else the in-cluster Service; the tiers as given otherwise."""
    if settings.placement != "fgd":
        return tiers
    return with_extender(tiers, settings.placement_url or service_url(settings.namespace))
