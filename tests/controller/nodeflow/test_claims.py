"""`claims` holds what one mode must know of the other (whether it holds a node) without either
importing the other: held here against the modes' own states tables."""

from __future__ import annotations

from controller.nodeflow import claims
from controller.remediation import states as health
from controller.upgrade import states as upgrade


def test_upgrade_claim_is_the_upgrade_states_table() -> None:
    assert claims.UPGRADE.label == upgrade.STATE_LABEL
    assert claims.UPGRADE.holds == upgrade.IN_PROGRESS | {upgrade.UPGRADE_FAILED}


def test_health_claim_is_every_health_state() -> None:
    assert claims.HEALTH.label == health.STATE_LABEL
    assert claims.HEALTH.holds is None
    assert frozenset(health.STATES) == health.OUT_OF_SERVICE


def test_held() -> None:
    label = claims.UPGRADE.label
    assert claims.UPGRADE.held({label: upgrade.DRAIN_REQUIRED}) == upgrade.DRAIN_REQUIRED
    assert claims.UPGRADE.held({label: upgrade.UPGRADE_FAILED}) == upgrade.UPGRADE_FAILED
    # Waiting for admission or done: the upgrade does not hold the node.
    assert claims.UPGRADE.held({label: upgrade.UPGRADE_REQUIRED}) is None
    assert claims.UPGRADE.held({label: upgrade.UPGRADE_DONE}) is None
    assert claims.UPGRADE.held({}) is None
    assert claims.HEALTH.held({claims.HEALTH.label: health.HOT}) == health.HOT
    assert claims.HEALTH.held({claims.HEALTH.label: ""}) is None
    assert claims.HEALTH.held({}) is None
