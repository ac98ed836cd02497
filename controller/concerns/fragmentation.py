"""GPU fragmentation's step: each pool's fragmentation decided on the snapshot
(decide.fragmentation), exported with the pass's metrics (act.fragmentation)."""

from __future__ import annotations

from controller.act.fragmentation import export_fragmentation
from controller.concerns import PassView
from controller.decide.fragmentation import plan_fragmentation


def run(view: PassView) -> None:
    export_fragmentation(
        view.rt, plan_fragmentation(view.snapshot.pods, view.snapshot.nodes, view.rt.fleet)
    )
