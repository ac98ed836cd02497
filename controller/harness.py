"""What every pass of the controller sets up and tears down, written once.

A pass (reconcile, a driver upgrade, GPU remediation) is: clients (OPA, and Prometheus when it
reads metrics), a Lease unless it is a dry run, a Summary, an act `Runtime` once it has a
snapshot, and one way to end: another holder of the Lease skips the pass (`<events>.skipped`),
a simulated kill goes through, any other controller error fails it (counted under
`failure_concern` as temporary or permanent, `<events>.failed`). The summary then counts the
API requests of the pass and is logged (`<events>.summary`).

    harness = PassHarness(kube=kube, fleet=fleet, settings=settings, events="upgrade.pass",
                          failure_concern="upgrade", lease_suffix="-upgrade", log=log)
    harness.run(body)          # body() runs under the Lease; the clients are closed after it
    harness.finish()           # API requests, outcome, the summary logged
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import TextIO

from controller.act.opa import Opa
from controller.act.runtime import Runtime
from controller.config import FleetView, Settings
from controller.errors import ControllerError, InjectedFault, LeaseHeldError, error_kind
from controller.lease import Lease, held
from controller.log import Log
from controller.observe.kube import KubeClient
from controller.observe.metrics import Prometheus
from controller.observe.model import Namespace, Node
from controller.summary import Summary


class PassHarness:
    """One pass's clients, Lease and Summary, and its `except` ladder.

    events: the prefix of the pass's own log events (`pass`, `upgrade.pass`, `health.pass`).
    failure_concern: the concern a failed pass is counted under. lease_suffix: appended to the
    configured Lease name (each kind of pass has its own Lease). prometheus: a client to use
    (not closed here), True for one of the harness's own, None for none. prometheus_timeout:
    the own client's timeout (default the request timeout)."""

    def __init__(
        self,
        *,
        kube: KubeClient,
        fleet: FleetView,
        settings: Settings,
        events: str,
        failure_concern: str,
        lease_suffix: str = "",
        prometheus: Prometheus | bool | None = None,
        prometheus_timeout: float | None = None,
        out: TextIO | None = None,
        log: Log | None = None,
    ) -> None:
        self.kube, self.fleet, self.settings = kube, fleet, settings
        self.events, self.failure_concern = events, failure_concern
        self.log = log or Log()
        self.out = out or sys.stdout
        self.summary = Summary(dry_run=settings.dry_run)
        self.skipped: str | None = None
        self.error: str | None = None
        self.opa = Opa(
            settings.opa_url,
            ca_file=settings.opa_ca_file,
            token_file=settings.opa_token_file,
            timeout=settings.request_timeout_seconds,
        )
        self._owns_prometheus = prometheus is True
        self.prometheus: Prometheus | None = (
            Prometheus(
                settings.prometheus_url,
                timeout=prometheus_timeout or settings.request_timeout_seconds,
            )
            if prometheus is True
            else prometheus or None
        )
        self.lease = (
            None
            if settings.dry_run
            else Lease(
                kube,
                namespace=settings.lease_namespace,
                name=settings.lease_name + lease_suffix,
                seconds=settings.lease_seconds,
                log=self.log,
            )
        )
        self.requests_before = kube.requests_made

    def runtime(
        self,
        now: float,
        *,
        after_action: Callable[[str], None] | None = None,
        namespaces: dict[str, Namespace] | None = None,
        nodes: dict[str, Node] | None = None,
    ) -> Runtime:
        """The act Runtime of the pass, at the pass's clock `now`."""
        return Runtime(
            kube=self.kube,
            opa=self.opa,
            fleet=self.fleet,
            settings=self.settings,
            now=now,
            summary=self.summary,
            log=self.log,
            out=self.out,
            after_action=after_action,
            namespaces={} if namespaces is None else namespaces,
            nodes={} if nodes is None else nodes,
        )

    def run(self, body: Callable[[], None]) -> None:
        """`body` under the Lease. A Lease held elsewhere skips the pass; a simulated kill
        (`InjectedFault`) goes through; any other controller error fails the pass. The clients
        are closed in every case."""
        try:
            with held(self.lease):
                body()
        except LeaseHeldError as error:
            self.skipped = self.summary.skipped = str(error)
            self.log.info(f"{self.events}.skipped", reason=str(error))
        except InjectedFault:
            raise
        except ControllerError as error:
            kind = error_kind(error)
            self.summary.error(self.failure_concern, kind)
            self.error = str(error)
            self.log.error(f"{self.events}.failed", error=str(error), kind=kind)
        finally:
            self.opa.close()
            if self._owns_prometheus and self.prometheus is not None:
                self.prometheus.close()

    def finish(self) -> Summary:
        """The pass's API requests and outcome into the summary, which is logged."""
        self.summary.finish(self.kube.requests_made - self.requests_before)
        self.log.info(f"{self.events}.summary", **self.summary.as_dict())
        return self.summary
