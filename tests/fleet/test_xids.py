"""The Xid table of the fleet: one table for the remediation and the Xid alert."""

from __future__ import annotations

from controller.remediation import states
from fleet.xids import XID_RULES, actionable_xids


def test_every_remedy_is_one_the_remediation_carries_out() -> None:
    remedies = {rule.remedy for rule in XID_RULES.values()} - {None}
    assert remedies == {states.GPU_RESET, states.REBOOT}
    assert remedies <= set(states.REMEDIES)


def test_the_application_s_own_errors_ask_nothing_and_hardware_faults_do() -> None:
    for xid in (13, 31, 43, 45):
        assert XID_RULES[xid].remedy is None, xid
    actionable = actionable_xids()
    assert not {13, 31, 43, 45, 63, 92, 94} & set(actionable)
    assert {48, 74, 79, 95, 119, 160} <= set(actionable)
    assert list(actionable) == sorted(actionable)
    assert all(XID_RULES[xid].remedy for xid in actionable)
