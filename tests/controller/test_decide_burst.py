"""Bursting's decide step (pure: pools in tier order, the estimate, the policy's inputs), and the
policy answering them on the real OPA with the local stack's configuration."""

from __future__ import annotations

from typing import Any

import pytest

from controller.act.opa import Opa
from controller.config import parse_config
from controller.decide.burst import HORIZON_SECONDS, burst_inputs, pool_tiers
from localfleet.servers import OpaServer
from tests.controller.builders import NOW, a_pod
from tests.controller.conftest import config_for


def document(reserved_for: str | None = None) -> dict[str, Any]:
    found = config_for("ml-research")
    # the H100, TPU and A100 pools only: the local stack's Karpenter pool is the scene's, and
    # these tests state the tier order over the static pools
    found["pools"].pop("a10g-ondemand", None)
    if reserved_for is not None:
        found["pools"]["h100-reserved"] = {
            **found["pools"]["h100-ondemand"],
            "teams": [reserved_for],
        }
    return found


def waiting_training(gpus: int = 8, annotations: dict[str, str] | None = None) -> Any:
    pod = a_pod("train").type("training").gpus(gpus).pending(NOW - 600)
    for key, value in (annotations or {}).items():
        pod = pod.annotate(key, value)
    return pod.build()


def test_pools_in_tier_order_and_other_teams_reserved_pools_left_out() -> None:
    fleet = parse_config(document(reserved_for="research"))
    names = [(p.tier, p.name) for p in pool_tiers(fleet, "research", {"local": "eu-west-1"})]
    assert names == [
        ("reserved", "h100-reserved"),
        ("on-demand", "h100-ondemand"),
        ("on-demand", "tpu-v5e"),
        ("spot", "a100-spot"),
    ]
    assert all(
        p.region == "eu-west-1" for p in pool_tiers(fleet, "research", {"local": "eu-west-1"})
    )
    assert "h100-reserved" not in [p.name for p in pool_tiers(fleet, "serving")]


def test_inputs_for_the_tiers_after_the_one_waited_on_with_the_estimate() -> None:
    fleet = parse_config(document(reserved_for="research"))
    pools = pool_tiers(fleet, "research")
    inputs = burst_inputs(waiting_training(), fleet, "research", "reserved", pools, NOW)
    assert [(p.name, i["to_tier"]) for p, i in inputs] == [
        ("h100-ondemand", "on-demand"),
        ("a100-spot", "spot"),
    ]
    pool, given = inputs[0]
    runtime = fleet.workload_types["training"].default_max_runtime_seconds or HORIZON_SECONDS
    price = fleet.models[pool.model].price_per_hour_usd["on-demand"]
    assert given["estimate_usd"] == round(8 * price * runtime / 3600, 2)
    assert given["pending_seconds"] == 600
    assert given["from_tier"] == "reserved"
    running = a_pod("r").type("training").gpus(8).on("gpu-1").build()
    assert burst_inputs(running, fleet, "research", "reserved", pools, NOW) == []


@pytest.mark.integration
def test_the_policy_takes_the_next_tier_the_type_may_use_within_budget(
    opa_server: OpaServer,
) -> None:
    raw = document(reserved_for="research")
    opa_server.put_data("fleetplane/config", raw)
    opa_server.put_data("fleetplane/reservations", {})
    fleet = parse_config(raw)
    pools = pool_tiers(fleet, "research", {"local": "eu-west-1"})
    opa = Opa(opa_server.url)
    try:

        def answers(pod: Any, spent: float) -> list[tuple[str, bool]]:
            month = "2026-11"  # NOW is in November 2026
            opa_server.put_data("fleetplane/spend", {"research": {"month": month, "usd": spent}})
            return [
                (pool.name, opa.decide("burst", given).allow)
                for pool, given in burst_inputs(pod, fleet, "research", "reserved", pools, NOW)
            ]

        # One 8-GPU training run for a day on on-demand H100s costs about 2,360 USD.
        assert answers(waiting_training(), 0) == [("h100-ondemand", True), ("a100-spot", False)]
        # Past the warning line (0.8 of 50,000) with the burst: no tier.
        assert answers(waiting_training(), 38_000) == [
            ("h100-ondemand", False),
            ("a100-spot", False),
        ]
        # Data that must stay in the US: not onto this EU region's pools.
        us = a_pod("train").type("training").gpus(8).pending(NOW - 600)
        us = us.label("fleetplane.dev/data-residency", "us").build()
        assert answers(us, 0) == [("h100-ondemand", False), ("a100-spot", False)]
    finally:
        opa.close()
        opa_server.put_data("fleetplane/spend", {})
