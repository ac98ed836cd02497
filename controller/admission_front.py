"""The admission front: the gate's webhook endpoint that reserves as part of admitting
(issue 33, the budget race).

OPA alone cannot write: the controller's reservations (`decide/reservations.py`) are written
from pods, one keeper pass after they appear, so workloads admitted together were each priced
against the same headroom. The front stands where the API server calls the gate: it hands each
AdmissionReview to OPA as the API server would (`POST /`, OPA's `system.main` answers), and
when OPA allows one that reserves (`data.fleetplane.admission.admission_reservation`: an
accelerator workload's CREATE in a team namespace, with its estimate), it writes that entry
under `data.fleetplane.admitted.<team>.<uid>` of **every** OPA replica before it answers (each
replica keeps its own data, and the next review may be judged by any of them). Reviews are
judged one at a time, so the next review counts the entry (policies/fleetplane/budget/
budget.rego, `admitted_reserved`); an entry lapses after `hold_seconds`, by which time the
controller's reservations hold the workload's pods (and the gate stops counting the entry as
soon as they do).

- One review at a time, one front: a team's headroom can only be shared by reviews that see each
  other's entries, and two fronts would each judge without the other's entry in flight. So the
  front runs as one replica under a Lease (`Holding`): it serves only while it holds the Lease,
  and refuses every review once its hold may have lapsed, so a second front (a rollout, a node
  that lost touch) never judges beside it. Decisions take a few milliseconds: one front
  serialises a few hundred a second.
- Fail closed: an entry that cannot be written to every replica refuses the review that would
  have reserved it (the replicas that took it over-reserve until it lapses, never under); the
  API server's `failurePolicy: Fail` refuses every judged request while the front is down.
- What it forwards it does not judge: OPA's answer is returned as it came, the entry aside.
- It deletes the entries it wrote once they lapse, at its next write. A replica that starts
  after an entry was written does not hold it: until the keeper reserves for the workload's
  pods, that replica prices as if it had not been admitted (entries are not in OPA's start
  files).
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import requests

from controller.act.opa import Opa, read_token
from controller.errors import ControllerError
from controller.lease import Lease
from controller.observe.endpoints import Endpoint

RESERVATION = "/v1/data/fleetplane/admission/admission_reservation"
ADMITTED = "fleetplane/admitted"
HOLD_SECONDS = 900
"""How long an entry holds: the keeper's refresh (at most a few minutes) and a pod's creation
by its controllers, with room to spare; the gate counts an entry at most once either way."""

Replicas = Callable[[], list[Endpoint]]
"""The OPA replicas an entry goes to (controller/observe/endpoints.py `ready_endpoints` of the
gate's Service in the cluster)."""


class AdmissionFront:
    """Judges AdmissionReviews through OPA at `opa_url` and reserves what they admit, on each of
    `replicas()` (None: `opa_url` is the one OPA).

    token_file: the front's bearer token for OPA (policies/system/authz.rego gives its role
    the admission decision, the reservation query and the entries, nothing else); ca_file: the
    CA bundle of an HTTPS OPA; holding: whether the front may judge now (None: always)."""

    def __init__(
        self,
        opa_url: str,
        *,
        token_file: str | None = None,
        ca_file: str | None = None,
        replicas: Replicas | None = None,
        holding: Callable[[], bool] | None = None,
        hold_seconds: int = HOLD_SECONDS,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.opa_url = opa_url.rstrip("/")
        self.hold_seconds = hold_seconds
        self.timeout = timeout
        self.clock = clock
        self.reserved = 0
        self._opa = Opa(self.opa_url, ca_file=ca_file, token_file=token_file, timeout=timeout)
        self._headers = {"Content-Type": "application/json"}
        if token_file is not None:
            self._headers["Authorization"] = f"Bearer {read_token(token_file)}"
        self._verify: bool | str = ca_file or True
        self._replicas = replicas or self._the_one_opa
        self._holding = holding or (lambda: True)
        self._session = requests.Session()
        self._lock = threading.Lock()
        self._written: dict[tuple[str, str], int] = {}

    def review(self, body: bytes) -> bytes:
        """The AdmissionReview answer to the review in `body`, its reservation written."""
        with self._lock:
            if not self._holding():
                return orjson.dumps(refusal(_review_of(body), "not serving: its Lease is not held"))
            answer = self._post("/", body)
            response = answer.get("response") if isinstance(answer, dict) else None
            if not isinstance(response, dict) or response.get("allowed") is not True:
                return orjson.dumps(answer)
            review = orjson.loads(body)
            try:
                reservation = self._post(RESERVATION, orjson.dumps({"input": review})).get("result")
                if isinstance(reservation, dict):
                    self._write(reservation)
            except (requests.RequestException, ValueError, ControllerError) as error:
                return orjson.dumps(
                    refusal(answer, f"could not write the workload's reservation: {error}")
                )
            return orjson.dumps(answer)

    def ready(self) -> bool:
        """Whether the front judges now (its readiness probe)."""
        return self._holding()

    def _the_one_opa(self) -> list[Endpoint]:
        parts = urlsplit(self.opa_url)
        port = parts.port or (443 if parts.scheme == "https" else 80)
        return [Endpoint(parts.hostname or "", port)]

    def _post(self, path: str, body: bytes) -> Any:
        reply = self._session.post(
            f"{self.opa_url}{path}",
            data=body,
            headers=self._headers,
            timeout=self.timeout,
            verify=self._verify,
        )
        reply.raise_for_status()
        return orjson.loads(reply.content)

    def _write(self, reservation: dict[str, Any]) -> None:
        team, uid, usd = reservation["team"], reservation["uid"], reservation["usd"]
        entry = {"usd": usd, "expires_at": int(self.clock()) + self.hold_seconds}
        replicas = self._replicas()
        if not replicas:
            raise ValueError("no ready OPA replica to write it to")
        # PUT creates the team's document when it has none yet.
        failed = self._opa.put_data_to(f"{ADMITTED}/{team}/{uid}", entry, replicas)
        # written where it was taken, so that it is deleted there once it lapses
        self._written[(team, uid)] = entry["expires_at"]
        if failed:
            raise ValueError(
                f"reached {len(replicas) - len(failed)} of {len(replicas)} OPA replicas; not: "
                + "; ".join(failed)
            )
        self.reserved += 1
        self._drop_lapsed(replicas)

    def _drop_lapsed(self, replicas: list[Endpoint]) -> None:
        """Delete the entries this front wrote that have lapsed (the gate ignores them already;
        this keeps the document from growing with every workload ever admitted). What a
        replica did not take is left for the next write to try again."""
        now = self.clock()
        for (team, uid), expires_at in list(self._written.items()):
            if expires_at > now:
                continue
            if not self._opa.delete_data_from(f"{ADMITTED}/{team}/{uid}", replicas):
                del self._written[(team, uid)]


class Holding:
    """The front's Lease, held while it serves: taken before it serves (waiting while another
    front holds it), renewed every third of its duration on a thread. `__call__` is true while
    the last renewal is younger than the duration less one renewal period, so a front that
    cannot renew stops judging before another may take the Lease over. Given back by
    `lease.release()` when the front stops."""

    def __init__(self, lease: Lease, stop: threading.Event) -> None:
        self.lease = lease
        self.stop = stop
        self.period = lease.seconds / 3
        self._renewed = 0.0

    def take(self) -> bool:
        """Wait for the Lease (until `stop`); whether it was taken."""
        while not self.stop.is_set():
            try:
                self.lease.acquire()
            except ControllerError as error:
                self.lease.log.info("front.lease.waiting", reason=str(error))
                self.stop.wait(self.period)
                continue
            self._renewed = time.monotonic()
            threading.Thread(target=self._keep, name="front-lease", daemon=True).start()
            return True
        return False

    def __call__(self) -> bool:
        return time.monotonic() - self._renewed < self.lease.seconds - self.period

    def _keep(self) -> None:
        while not self.stop.wait(self.period):
            try:
                self.lease.renew()
                self._renewed = time.monotonic()
            except ControllerError as error:
                self.lease.log.error("front.lease.renew.failed", error=str(error))


def _review_of(body: bytes) -> dict[str, Any]:
    """The AdmissionReview answer frame for `body` (its uid), to refuse it without OPA."""
    try:
        request = orjson.loads(body).get("request") or {}
    except (orjson.JSONDecodeError, AttributeError):
        request = {}
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": request.get("uid", "")},
    }


def refusal(answer: dict[str, Any], why: str) -> dict[str, Any]:
    """OPA's answer turned into a refusal that says why."""
    response = dict(answer.get("response") or {})
    response["allowed"] = False
    response["status"] = {
        "code": 503,
        "reason": "ServiceUnavailable",
        "message": f"admission-front: {why}; try again",
    }
    return {**answer, "response": response}


def serve(
    front: AdmissionFront, host: str, port: int, *, tls: tuple[Path, Path]
) -> ThreadingHTTPServer:
    """Serve `front` over HTTPS (the API server calls webhooks over TLS only) on a thread;
    `server.server_address` has the port when `port` is 0. Stop with `shutdown()`."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                answer = front.review(body)
                status = 200
            except (requests.RequestException, ValueError) as error:
                answer, status = orjson.dumps({"error": str(error)}), 502
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def do_GET(self) -> None:
            # the readiness probe: ready only while the front may judge (holds its Lease)
            ok = self.path == "/healthz" and front.ready()
            self.send_response(200 if ok else 503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            return  # one line per review would drown the controller's own log

    server = ThreadingHTTPServer((host, port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tls[0]), str(tls[1]))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name="admission-front", daemon=True).start()
    return server
