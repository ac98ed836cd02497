"""The health lab of a test of its own: a kwok GPU pool, a Prometheus holding its series, the
shared OPA; the pool's nodes are deleted afterwards."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pytest

from localfleet.controlplane import LocalCluster
from localfleet.servers import OpaServer, PrometheusServer, Sample
from tests.controller.remediation.lab import HealthLab


@pytest.fixture
def lab_factory(
    kube: LocalCluster,
    opa_server: OpaServer,
    namespace: str,
    prometheus_factory: Callable[[Iterable[Sample]], PrometheusServer],
) -> Iterator[Callable[..., HealthLab]]:
    made: list[HealthLab] = []

    def make(shape: Any, **kwargs: Any) -> HealthLab:
        lab = HealthLab(kube, opa_server, namespace, **kwargs)
        made.append(lab)
        return lab.start(prometheus_factory, shape)

    yield make
    for lab in made:
        lab.stop()
