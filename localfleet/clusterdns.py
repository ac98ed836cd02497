"""Cluster DNS for the real node's pods: `<service>.<namespace>.svc.cluster.local` -> ClusterIP.

A cloud cluster runs CoreDNS; the pinned tools have none, and the in-cluster controller needs
one name only (the OPA Service's, `controller.opa_url` as the rendered configuration writes it,
checked against OPA's serving certificate). So this is the smallest honest stand-in: an
authoritative server for the cluster domain that answers A queries for Services with a
ClusterIP, read from the API server (cached for two seconds), NXDOMAIN for every other name in
the domain and REFUSED for names outside it (no forwarding: the local fleet is offline). The
kubelet points its pods at it (`clusterDNS`).

    python -m localfleet.clusterdns --listen 10.200.1.1:53 --kubeconfig .fleet/local/kubeconfig
"""

from __future__ import annotations

import argparse
import json
import socket
import ssl
import struct
import time
import urllib.request
from pathlib import Path
from typing import Any

DOMAIN = "cluster.local"
TTL = 5
A, AAAA, IN = 1, 28, 1
NOERROR, NXDOMAIN, REFUSED, FORMERR = 0, 3, 5, 1


class Services:
    """ClusterIPs by (namespace, name), read from the API server with the kubeconfig's client
    certificate."""

    def __init__(self, kubeconfig: Path, max_age: float = 2.0) -> None:
        config = json.loads(kubeconfig.read_text())
        cluster = config["clusters"][0]["cluster"]
        user = config["users"][0]["user"]
        self.server = cluster["server"]
        self.context = ssl.create_default_context(cafile=cluster["certificate-authority"])
        self.context.load_cert_chain(user["client-certificate"], user["client-key"])
        self.max_age = max_age
        self._ips: dict[tuple[str, str], str] = {}
        self._read_at = 0.0

    def ip(self, namespace: str, name: str) -> str | None:
        if time.monotonic() - self._read_at > self.max_age:
            self._refresh()
        return self._ips.get((namespace, name))

    def _refresh(self) -> None:
        url = f"{self.server}/api/v1/services"
        with urllib.request.urlopen(url, context=self.context, timeout=5) as response:
            items = json.loads(response.read())["items"]
        self._ips = {
            (item["metadata"]["namespace"], item["metadata"]["name"]): item["spec"]["clusterIP"]
            for item in items
            if item["spec"].get("clusterIP") not in (None, "", "None")
        }
        self._read_at = time.monotonic()


def _question(packet: bytes) -> tuple[str, int, int, int]:
    """(name, qtype, qclass, offset after the question) of the first question."""
    labels, offset = [], 12
    while True:
        length = packet[offset]
        offset += 1
        if length == 0:
            break
        if length & 0xC0:
            raise ValueError("compressed name in a question")
        labels.append(packet[offset : offset + length].decode("ascii").lower())
        offset += length
    qtype, qclass = struct.unpack("!HH", packet[offset : offset + 4])
    return ".".join(labels), qtype, qclass, offset + 4


def answer(packet: bytes, lookup: Any, domain: str = DOMAIN) -> bytes:
    """The response to one query packet."""
    (ident, flags) = struct.unpack("!HH", packet[:4])
    recursion_desired = flags & 0x0100
    try:
        name, qtype, qclass, end = _question(packet)
    except (IndexError, ValueError, UnicodeDecodeError):
        return struct.pack("!HHHHHH", ident, 0x8000 | recursion_desired | FORMERR, 0, 0, 0, 0)
    question = packet[12:end]
    records = b""
    if name != domain and not name.endswith("." + domain):
        code = REFUSED
    else:
        parts = name[: -len(domain) - 1].split(".") if name != domain else []
        ip = None
        if len(parts) == 3 and parts[2] == "svc":
            ip = lookup.ip(parts[1], parts[0])
        if ip is None:
            code = NXDOMAIN
        else:
            code = NOERROR  # an AAAA query for a Service gets no records (IPv4 only)
            if qtype == A and qclass == IN:
                # the name is a pointer to the question (offset 12)
                records = struct.pack("!HHHIH", 0xC00C, A, IN, TTL, 4) + socket.inet_aton(ip)
    count = 1 if records else 0
    header = struct.pack(
        "!HHHHHH", ident, 0x8000 | 0x0400 | recursion_desired | code, 1, count, 0, 0
    )
    return header + question + records


def serve(listen: str, kubeconfig: Path) -> None:
    host, port = listen.rsplit(":", 1)
    lookup = Services(kubeconfig)
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind((host, int(port)))
    print(f"cluster DNS for {DOMAIN} on {listen}", flush=True)
    while True:
        packet, client = sock.recvfrom(512)
        try:
            sock.sendto(answer(packet, lookup), client)
        except OSError as error:  # the API server away for a moment: the client retries
            print(f"query from {client[0]}: {error}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m localfleet.clusterdns", description=__doc__)
    parser.add_argument("--listen", required=True, help="IP:PORT to answer on (UDP)")
    parser.add_argument("--kubeconfig", required=True, type=Path)
    args = parser.parse_args(argv)
    serve(args.listen, args.kubeconfig)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
