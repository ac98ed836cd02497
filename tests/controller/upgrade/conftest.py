"""The upgrade lab fixture: a pool of the test's own on the shared control plane, removed
afterwards (see tests/upgrade/lab.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from localfleet.controlplane import LocalCluster
from localfleet.servers import OpaServer
from tests.controller.upgrade.lab import Lab


@pytest.fixture
def lab_factory(
    kube: LocalCluster, opa_server: OpaServer, namespace: str
) -> Iterator[Callable[..., Lab]]:
    made: list[Lab] = []

    def make(**kwargs: Any) -> Lab:
        lab = Lab(kube, opa_server, namespace, **kwargs)
        made.append(lab)
        return lab.start()

    yield make
    for lab in made:
        lab.stop()
