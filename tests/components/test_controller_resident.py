"""`controller.resident`: the reconcile passes run in the keeper's Deployment
(`fleetplane controller reconcile --watch`), not in a CronJob; what is declared for it."""

from __future__ import annotations

import argparse

from components.controller_job import controller_manifests
from controller.admission_keeper import LEASE_SUFFIX
from controller.cli import add_parser
from fleet.config import FleetConfig


def resident(fleet: FleetConfig) -> FleetConfig:
    return fleet.model_copy(
        update={"controller": fleet.controller.model_copy(update={"resident": True})}
    )


def test_resident_declares_no_reconcile_cronjob_and_the_keeper_reconciles(
    stack_fleets: dict[str, FleetConfig],
) -> None:
    fleet = stack_fleets["prod"]
    assert fleet.controller.resident is False  # the default: the CronJob
    before = {m["metadata"]["name"] for m in controller_manifests(fleet) if m["kind"] == "CronJob"}
    manifests = controller_manifests(resident(fleet))
    crons = {m["metadata"]["name"] for m in manifests if m["kind"] == "CronJob"}
    assert before - crons == {"fleetplane-controller"}
    assert crons == {"fleetplane-controller-upgrade", "fleetplane-controller-health"}
    (keeper,) = [m for m in manifests if m["kind"] == "Deployment"]
    assert keeper["spec"]["replicas"] == 1
    (container,) = keeper["spec"]["template"]["spec"]["containers"]
    assert container["command"] == ["fleetplane", "controller", "reconcile", "--watch"]
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(container["command"][1:])
    assert args.controller_command == "reconcile" and args.watch is True
    # its Role lets it hold both Leases: the reconcile pass's and the keeper's own
    (role,) = [m for m in manifests if m["kind"] == "Role"]
    renewable = {
        name
        for rule in role["rules"]
        if "leases" in rule["resources"] and "patch" in rule["verbs"]
        for name in rule.get("resourceNames", [])
    }
    lease = fleet.controller.lease_name
    assert {lease, lease + LEASE_SUFFIX} <= renewable
