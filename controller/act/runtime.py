"""What the act handlers share during one pass."""

from __future__ import annotations

import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TextIO, TypeVar

from controller.act.events import EventRecorder
from controller.act.opa import Opa
from controller.config import FleetView, Settings
from controller.errors import ControllerError, InjectedFault, error_kind
from controller.log import Log
from controller.observe.kube import KubeClient
from controller.observe.model import Namespace, Node
from controller.summary import Summary

T = TypeVar("T")


@dataclass(kw_only=True)
class Runtime:
    """kube, opa: clients. fleet, settings: configuration. now: the pass's clock (epoch seconds;
    injected by tests and `--now`). after_action: called with an action name after each side
    effect (a test hook that can raise to simulate a run killed half way). events: where Events
    go; by default the cluster's, dry when the run is (every pass records them the same way)."""

    kube: KubeClient
    opa: Opa
    fleet: FleetView
    settings: Settings
    now: float
    summary: Summary
    log: Log = field(default_factory=Log)
    out: TextIO = field(default_factory=lambda: sys.stdout)
    after_action: Callable[[str], None] | None = None
    namespaces: dict[str, Namespace] = field(default_factory=dict)
    nodes: dict[str, Node] = field(default_factory=dict)
    events: EventRecorder = field(default=None)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.events is None:
            self.events = EventRecorder(self.kube, dry_run=self.settings.dry_run, log=self.log)

    @property
    def dry_run(self) -> bool:
        return self.settings.dry_run

    def guarded(self, concern: str, action: str, target: str, run: Callable[[], T]) -> T | None:
        """Run one action; its errors stay with it (logged, counted) and the pass goes on
        (None is returned). An injected fault (a simulated kill) is not caught."""
        try:
            return run()
        except InjectedFault:
            raise
        except ControllerError as error:
            kind = error_kind(error)
            self.log.error(f"{concern}.{action}.failed", target=target, error=str(error), kind=kind)
            self.summary.action(concern, action, "failed")
            self.summary.error(concern, kind)
            return None

    def report(self, concern: str, event: str, error: ControllerError, **fields: Any) -> None:
        """An error the concern goes on without (evidence it could not read, a concern that
        failed): counted under `concern` by kind, logged as `event`."""
        kind = error_kind(error)
        self.summary.error(concern, kind)
        self.log.error(event, error=str(error), kind=kind, **fields)

    def each(self, items: list[Any], run: Callable[[Any], Any]) -> list[Any]:
        """Run independent actions (each on its own objects) `act_concurrency` at a time; the
        results in order. An injected fault stops the rest (futures not started are cancelled)."""
        workers = max(1, self.settings.act_concurrency)
        if workers == 1 or len(items) <= 1:
            return [run(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
            futures = [pool.submit(run, item) for item in items]
            try:
                return [future.result() for future in futures]
            except BaseException:
                for future in futures:
                    future.cancel()
                raise

    def would(self, concern: str, action: str, target: str, reason: str, **fields: Any) -> None:
        """Under --dry-run: print the action that would be taken, and log it."""
        self.out.write(f"DRY-RUN {concern}: would {action} {target}: {reason}\n")
        self.out.flush()
        self.log.info(f"{concern}.{action}.dry-run", target=target, reason=reason, **fields)
        self.summary.action(concern, action, "dry-run")

    def done(self, concern: str, action: str, target: str, reason: str, **fields: Any) -> None:
        self.log.info(f"{concern}.{action}", target=target, reason=reason, **fields)
        self.summary.action(concern, action, "done")
        if self.after_action is not None:
            self.after_action(f"{concern}.{action}")
