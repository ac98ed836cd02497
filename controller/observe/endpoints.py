"""The ready endpoints of a Service, from its EndpointSlices (discovery.k8s.io/v1).

OPA runs several replicas, each with its own in-memory store, so data the controller pushes
(the spend document) must reach every replica, not whichever one the Service picks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from controller.errors import PermanentError
from controller.observe.kube import KubeClient

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


@dataclass(frozen=True, slots=True, order=True)
class Endpoint:
    address: str
    port: int
    pod: str | None = None  # the targetRef's name, for messages

    @property
    def host(self) -> str:
        """The address as a URL host (an IPv6 address in brackets)."""
        return f"[{self.address}]" if ":" in self.address else self.address

    def __str__(self) -> str:
        where = f"{self.host}:{self.port}"
        return f"{self.pod} ({where})" if self.pod else where


def ready_endpoints(kube: KubeClient, namespace: str, service: str) -> list[Endpoint]:
    """Every ready address of the Service, with the port its slice gives (each slice of the
    Service must carry exactly one port: the OPA Service has one). An endpoint whose `ready`
    condition is absent counts as ready, as the API documents; a terminating one is not."""
    path = f"/apis/discovery.k8s.io/v1/namespaces/{quote(namespace, safe='')}/endpointslices"
    slices = kube.list(path, params={"labelSelector": f"{SERVICE_NAME_LABEL}={service}"})
    found: set[Endpoint] = set()
    for item in slices:
        name = (item.get("metadata") or {}).get("name", "?")
        if item.get("addressType") not in ("IPv4", "IPv6"):
            continue  # FQDN slices are not written for Services with a selector
        endpoints = item.get("endpoints") or []
        if not endpoints:
            continue
        ports = [p.get("port") for p in item.get("ports") or []]
        if len(ports) != 1 or not isinstance(ports[0], int):
            raise PermanentError(
                f"EndpointSlice {namespace}/{name} of Service {service}: expected one port, "
                f"got {item.get('ports')!r}"
            )
        for endpoint in endpoints:
            if not _ready(endpoint):
                continue
            pod = (endpoint.get("targetRef") or {}).get("name")
            for address in endpoint.get("addresses") or []:
                found.add(Endpoint(str(address), ports[0], pod))
    return sorted(found)


def _ready(endpoint: dict[str, Any]) -> bool:
    conditions = endpoint.get("conditions") or {}
    return conditions.get("ready") is not False and conditions.get("terminating") is not True
