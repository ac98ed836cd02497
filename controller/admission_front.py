"""The admission front: the gate's webhook endpoint that reserves as part of admitting
(issue 33, the budget race).

OPA alone cannot write: the controller's reservations (`decide/reservations.py`) are written
from pods, one keeper pass after they appear, so workloads admitted together were each priced
against the same headroom. The front stands where the API server calls the gate: it hands each
AdmissionReview to OPA as the API server would (`POST /`, OPA's `system.main` answers), and
when OPA allows one that reserves (`data.fleetplane.admission.admission_reservation`: an
accelerator workload's CREATE in a team namespace, with its estimate), it writes that entry
under `data.fleetplane.admitted.<team>.<uid>` before it answers. Reviews are judged one at a
time, so the next review counts the entry (policies/fleetplane/budget/budget.rego,
`admitted_reserved`); an entry lapses after `hold_seconds`, by which time the controller's
reservations hold the workload's pods (and the gate stops counting the entry as soon as they
do).

- One review at a time per front: a team's headroom can only be shared by reviews that see each
  other's entries. Decisions take a few milliseconds, so one front serialises a few hundred a
  second; run one replica (or shard teams over fronts).
- Fail closed: an entry that cannot be written refuses the review that would have reserved it
  (the API server's `failurePolicy: Fail` does the same when the front is down).
- What it forwards it does not judge: OPA's answer is returned as it came, the entry aside.
- It deletes the entries it wrote once they lapse, at its next write.
"""

from __future__ import annotations

import ssl
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import orjson
import requests

RESERVATION = "/v1/data/fleetplane/admission/admission_reservation"
ADMITTED = "/v1/data/fleetplane/admitted"
HOLD_SECONDS = 900
"""How long an entry holds: the keeper's refresh (at most a few minutes) and a pod's creation
by its controllers, with room to spare; the gate counts an entry at most once either way."""


class AdmissionFront:
    """Judges AdmissionReviews through OPA at `opa_url` and reserves what they admit.

    headers: sent to OPA with every request (a bearer token where OPA requires one);
    verify: requests' verify (a CA bundle path for an HTTPS OPA)."""

    def __init__(
        self,
        opa_url: str,
        *,
        headers: dict[str, str] | None = None,
        verify: bool | str = True,
        hold_seconds: int = HOLD_SECONDS,
        timeout: float = 10.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.opa_url = opa_url.rstrip("/")
        self.hold_seconds = hold_seconds
        self.timeout = timeout
        self.clock = clock
        self.reserved = 0
        self._headers = {"Content-Type": "application/json", **(headers or {})}
        self._verify = verify
        self._session = requests.Session()
        self._lock = threading.Lock()
        self._written: dict[tuple[str, str], int] = {}

    def review(self, body: bytes) -> bytes:
        """The AdmissionReview answer to the review in `body`, its reservation written."""
        with self._lock:
            answer = self._post("/", body)
            response = answer.get("response") if isinstance(answer, dict) else None
            if not isinstance(response, dict) or response.get("allowed") is not True:
                return orjson.dumps(answer)
            review = orjson.loads(body)
            try:
                reservation = self._post(RESERVATION, orjson.dumps({"input": review})).get("result")
                if isinstance(reservation, dict):
                    self._write(reservation)
            except (requests.RequestException, ValueError) as error:
                return orjson.dumps(refusal(answer, f"the workload's reservation: {error}"))
            return orjson.dumps(answer)

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
        # PUT creates the team's document when it has none yet.
        reply = self._session.put(
            f"{self.opa_url}{ADMITTED}/{team}/{uid}",
            data=orjson.dumps(entry),
            headers=self._headers,
            timeout=self.timeout,
            verify=self._verify,
        )
        reply.raise_for_status()
        self.reserved += 1
        self._written[(team, uid)] = entry["expires_at"]
        self._drop_lapsed()

    def _drop_lapsed(self) -> None:
        """Delete the entries this front wrote that have lapsed (the gate ignores them already;
        this keeps the document from growing with every workload ever admitted). A failure is
        left for the next write to try again."""
        now = self.clock()
        for (team, uid), expires_at in list(self._written.items()):
            if expires_at > now:
                continue
            try:
                reply = self._session.delete(
                    f"{self.opa_url}{ADMITTED}/{team}/{uid}",
                    headers=self._headers,
                    timeout=self.timeout,
                    verify=self._verify,
                )
            except requests.RequestException:
                return
            if reply.status_code in (204, 404):
                del self._written[(team, uid)]


def refusal(answer: dict[str, Any], why: str) -> dict[str, Any]:
    """OPA's answer turned into a refusal that says why."""
    response = dict(answer.get("response") or {})
    response["allowed"] = False
    response["status"] = {
        "code": 503,
        "reason": "ServiceUnavailable",
        "message": f"admission-front: could not write {why}; try again",
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

        def log_message(self, format: str, *args: Any) -> None:
            return  # one line per review would drown the controller's own log

    server = ThreadingHTTPServer((host, port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(str(tls[0]), str(tls[1]))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name="admission-front", daemon=True).start()
    return server
