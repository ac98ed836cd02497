"""Spend reaches every replica of the in-cluster OPA, each with its own data: the controller
finds them in the Service's EndpointSlices (real kube-apiserver) and writes to each pod address
over HTTPS, checking the certificate against the Service's name (real OPA servers with TLS)."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from components.tls import _build, service_dns_names
from controller.act.opa import SPEND_PATH, Opa
from controller.errors import PermanentError
from controller.observe.endpoints import Endpoint, ready_endpoints
from controller.observe.kube import KubeClient
from localfleet.servers import OpaServer
from tests.controller.conftest import Harness

pytestmark = pytest.mark.integration

SERVICE = "fleetplane-opa"


def endpoint_slice(
    name: str, service: str, ports: list[int], endpoints: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/service-name": service,
                # not the EndpointSlice controller's: it leaves these alone
                "endpointslice.kubernetes.io/managed-by": "tests.fleetplane.dev",
            },
        },
        "addressType": "IPv4",
        "ports": [{"name": f"p{port}", "port": port, "protocol": "TCP"} for port in ports],
        "endpoints": endpoints,
    }


def pod_endpoint(address: str, pod: str, **conditions: bool) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "addresses": [address],
        "targetRef": {"kind": "Pod", "name": pod},
    }
    if conditions:
        entry["conditions"] = conditions
    return entry


def create(client: KubeClient, namespace: str, body: dict[str, Any]) -> None:
    client.create(f"/apis/discovery.k8s.io/v1/namespaces/{namespace}/endpointslices", body)


def test_ready_endpoints_of_a_service(client: KubeClient, namespace: str) -> None:
    create(
        client,
        namespace,
        endpoint_slice(
            "opa-a",
            SERVICE,
            [8443],
            [
                pod_endpoint("10.1.0.1", "opa-0", ready=True),
                pod_endpoint("10.1.0.2", "opa-1", ready=False),
                pod_endpoint("10.1.0.3", "opa-2"),  # no conditions: ready, as documented
            ],
        ),
    )
    create(
        client,
        namespace,
        endpoint_slice(
            "opa-b",
            SERVICE,
            [8443],
            [pod_endpoint("10.1.0.4", "opa-3", ready=False, terminating=True)],
        ),
    )
    create(
        client, namespace, endpoint_slice("other", "other", [80], [pod_endpoint("10.9.9.9", "x")])
    )
    assert ready_endpoints(client, namespace, SERVICE) == [
        Endpoint("10.1.0.1", 8443, "opa-0"),
        Endpoint("10.1.0.3", 8443, "opa-2"),
    ]
    assert ready_endpoints(client, namespace, "absent") == []


def test_a_slice_with_two_ports_is_an_error(client: KubeClient, namespace: str) -> None:
    create(
        client,
        namespace,
        endpoint_slice("opa-a", SERVICE, [8443, 8181], [pod_endpoint("10.1.0.1", "opa-0")]),
    )
    with pytest.raises(PermanentError, match="expected one port"):
        ready_endpoints(client, namespace, SERVICE)


@pytest.fixture
def certificate(tmp_path: Path) -> dict[str, Path]:
    """A CA and a serving certificate for the OPA Service's names only, no address."""
    generate, _ = _build()
    pem = generate(dns_names=service_dns_names(SERVICE, "fleetplane-system"), validity_days=1)
    files = {}
    for key, name in (("cert_pem", "tls.crt"), ("key_pem", "tls.key"), ("ca_pem", "ca.crt")):
        files[name] = tmp_path / name
        files[name].write_text(pem[key])
    return files


def host_address() -> str:
    """This machine's own IPv4 address: EndpointSlices refuse loopback ones, and the replicas
    must be reachable at the address their slice gives."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 9))  # picks the outgoing interface; sends nothing
        address = probe.getsockname()[0]
    assert not address.startswith("127."), (
        "these tests need a non-loopback IPv4 address on this machine (EndpointSlices refuse "
        f"loopback ones), found only {address}"
    )
    return str(address)


@pytest.fixture
def replicas(certificate: dict[str, Path]) -> Iterator[list[OpaServer]]:
    address = host_address()
    servers = [
        OpaServer(tls=(certificate["tls.crt"], certificate["tls.key"]), https_host=address).start()
        for _ in range(2)
    ]
    try:
        yield servers
    finally:
        for server in servers:
            server.stop()


def opa_for(certificate: dict[str, Path], host: str = f"{SERVICE}.fleetplane-system.svc") -> Opa:
    return Opa(f"https://{host}:443", ca_file=str(certificate["tls.crt"].parent / "ca.crt"))


def at(server: OpaServer) -> Endpoint:
    return Endpoint(server.https_host, server.https_port, f"opa-{server.https_port}")


def test_spend_is_written_to_each_replica(
    replicas: list[OpaServer], certificate: dict[str, Path]
) -> None:
    document = {"research": {"month": "2026-11", "usd": 12.5, "updated_at": 1}}
    failed = opa_for(certificate).put_data_to(SPEND_PATH, document, [at(s) for s in replicas])
    assert failed == []
    for server in replicas:
        assert server.query("fleetplane/spend") == document


def test_a_replica_down_or_with_the_wrong_name_is_reported_and_the_others_still_written(
    replicas: list[OpaServer], certificate: dict[str, Path]
) -> None:
    up, down = replicas
    down_at = at(down)
    down.stop()
    failed = opa_for(certificate).put_data_to(SPEND_PATH, {"t": {"usd": 1}}, [at(up), down_at])
    assert len(failed) == 1
    assert failed[0].startswith(str(down_at))
    assert up.query("fleetplane/spend") == {"t": {"usd": 1}}
    # The certificate is checked, against the Service's name: another name is refused.
    refused = opa_for(certificate, "elsewhere.example").put_data_to(SPEND_PATH, {"t": 2}, [at(up)])
    assert len(refused) == 1
    assert "doesn't match" in refused[0]
    assert up.query("fleetplane/spend") == {"t": {"usd": 1}}


def test_a_pass_publishes_spend_to_every_ready_replica(
    harness: Harness, replicas: list[OpaServer], certificate: dict[str, Path]
) -> None:
    h = harness
    create(
        h.client,
        h.namespace,
        endpoint_slice(
            "opa-a",
            SERVICE,
            [replicas[0].https_port],
            [pod_endpoint(replicas[0].https_host, "opa-0")],
        ),
    )
    create(
        h.client,
        h.namespace,
        endpoint_slice(
            "opa-b",
            SERVICE,
            [replicas[1].https_port],
            [pod_endpoint(replicas[1].https_host, "opa-1")],
        ),
    )
    run = h.run(
        1795000000,
        concerns=("spend",),
        opa_url=f"https://{SERVICE}.fleetplane-system.svc:443",
        opa_ca_file=str(certificate["ca.crt"]),
        opa_service=f"{h.namespace}/{SERVICE}",
    )
    assert run.summary.errors == 0, json.dumps(run.summary.as_dict())
    published = [s.query("fleetplane/spend") for s in replicas]
    assert published[0] == published[1]
    assert "research" in published[0]
    # The harness's own OPA, which the Service name does not lead to, got nothing.
    assert h.opa.query("fleetplane/spend") == {}
