"""The cluster DNS stand-in: answers for Services, nothing else (no server needed)."""

from __future__ import annotations

import socket
import struct

from localfleet.clusterdns import NOERROR, NXDOMAIN, REFUSED, answer


class Lookup:
    def __init__(self, ips: dict[tuple[str, str], str]) -> None:
        self.ips = ips

    def ip(self, namespace: str, name: str) -> str | None:
        return self.ips.get((namespace, name))


def query(name: str, qtype: int = 1) -> bytes:
    labels = b"".join(bytes([len(part)]) + part.encode() for part in name.split("."))
    return (
        struct.pack("!HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
        + labels
        + b"\0"
        + struct.pack("!HH", qtype, 1)
    )


def parse(response: bytes) -> tuple[int, int, list[str]]:
    ident, flags, _, count, _, _ = struct.unpack("!HHHHHH", response[:12])
    assert ident == 0x1234 and flags & 0x8000
    ips = []
    if count:
        ips.append(socket.inet_ntoa(response[-4:]))
    return flags & 0xF, count, ips


LOOKUP = Lookup({("fleetplane-system", "fleetplane-opa"): "10.202.1.17"})


def test_a_service_name_resolves_to_its_cluster_ip() -> None:
    name = "fleetplane-opa.fleetplane-system.svc.cluster.local"
    assert parse(answer(query(name), LOOKUP)) == (NOERROR, 1, ["10.202.1.17"])
    # IPv6: the name exists, with no AAAA record (so resolvers do not try the next search)
    assert parse(answer(query(name, qtype=28), LOOKUP)) == (NOERROR, 0, [])


def test_other_names_are_not_found_or_refused() -> None:
    search_miss = "fleetplane-opa.fleetplane-system.svc.fleetplane-system.svc.cluster.local"
    assert parse(answer(query(search_miss), LOOKUP))[0] == NXDOMAIN
    assert parse(answer(query("other.default.svc.cluster.local"), LOOKUP))[0] == NXDOMAIN
    assert parse(answer(query("pypi.org"), LOOKUP))[0] == REFUSED
