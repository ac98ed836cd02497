"""The real OPA, asked in batches: one query answers every admission review, reclaim and
preempt decision a replay needs at one point in its timeline.

`policy/batch.rego` (package `replay.batch`) is uploaded through OPA's policy API next to the
project's policies; it maps the real entry points (`data.system.main`, the decisions under
`data.fleetplane.decisions`) over arrays of inputs. The configuration is written where a deployment
writes it (`data.fleetplane.config`). An admission review is evaluated with the clock set to
the submission's time (`with time.now_ns`) and with `data.fleetplane.spend` set to the document
the controller last published, sent along with the reviews (`with data.fleetplane.spend`):
writing that document into OPA every period would cost more than the reviews themselves (a
write under `data.fleetplane` costs OPA about 12 ms of CPU with the configuration loaded, a
review about 2 ms), and the policies see the same document either way.

The configuration written carries one extra key, `replay_marker` (no policy reads it), and
every answer echoes it: if anything else writes its own configuration into the same OPA (a
port picked by two processes at once), the replay stops with an error instead of counting
decisions made on someone else's configuration.
"""

from __future__ import annotations

import socket
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson

from controller.act.opa import Decision

BATCH_POLICY = Path(__file__).resolve().parent / "policy" / "batch.rego"
POLICY_ID = "fleetplane-replay-batch"
ANSWERS_PATH = "/v1/data/replay/batch/answers"


class PolicyError(RuntimeError):
    """OPA could not be reached, or answered something other than the contract."""


@dataclass(frozen=True, slots=True)
class Admission:
    """The AdmissionReview response for one submission."""

    allowed: bool
    messages: tuple[str, ...]
    warnings: tuple[str, ...]

    @property
    def rules(self) -> tuple[str, ...]:
        """The rules that denied it: the name each message starts with (`budget`, ...)."""
        return tuple(dict.fromkeys(m.split(":", 1)[0].strip() for m in self.messages))


@dataclass(kw_only=True)
class Answers:
    admission: list[Admission] = field(default_factory=list)
    reclaim: list[Decision] = field(default_factory=list)
    preempt: list[Decision] = field(default_factory=list)


class AnswersAhead:
    """Admission answers obtained before their submission happened, each valid for exactly
    what it was asked with: the review, the clock (`now_ns`) and the spend document. The
    configuration, the only other thing the gate reads, is fixed for a replay. An answer is
    taken once; anything that differs in any byte finds nothing and is asked for anew."""

    def __init__(self) -> None:
        self._answers: dict[tuple[bytes, int, bytes], Admission] = {}
        self.taken = 0

    @staticmethod
    def _key(
        review: dict[str, Any], now_ns: int, spend: dict[str, Any]
    ) -> tuple[bytes, int, bytes]:
        return (
            orjson.dumps(review, option=orjson.OPT_SORT_KEYS),
            now_ns,
            orjson.dumps(spend, option=orjson.OPT_SORT_KEYS),
        )

    def clear(self) -> None:
        self._answers.clear()

    def put(
        self, review: dict[str, Any], now_ns: int, spend: dict[str, Any], answer: Admission
    ) -> None:
        self._answers[self._key(review, now_ns, spend)] = answer

    def take(self, review: dict[str, Any], now_ns: int, spend: dict[str, Any]) -> Admission | None:
        if not self._answers:
            return None
        found = self._answers.pop(self._key(review, now_ns, spend), None)
        if found is not None:
            self.taken += 1
        return found


@dataclass(kw_only=True)
class QueryStats:
    queries: int = 0
    data_writes: int = 0
    seconds: float = 0.0
    admission: int = 0
    reclaim: int = 0
    preempt: int = 0


class BatchClient:
    """One keep-alive connection to an OPA server holding the project's policies."""

    def __init__(self, url: str, *, timeout: float = 60.0) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise PolicyError(f"{url}: the replay talks to a plain-HTTP OPA (http://host:port)")
        self.url = url.rstrip("/")
        self._host = parts.hostname
        self._port = parts.port or 80
        self._timeout = timeout
        self._connection: KeepAliveConnection | None = None
        self.marker = uuid.uuid4().hex
        self.stats = QueryStats()

    def close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    def _request(self, method: str, path: str, body: bytes, content_type: str) -> Any:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self._host}:{self._port}\r\n"
            f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode()
        for attempt in (1, 2):
            try:
                if self._connection is None:
                    self._connection = KeepAliveConnection(self._host, self._port, self._timeout)
                status, payload, reusable = self._connection.exchange(head + body)
            except (OSError, ValueError) as error:
                self.close()
                if attempt == 2:
                    raise PolicyError(f"opa {self.url}{path}: {error}") from error
                continue
            if not reusable:
                self.close()
            if status >= 300:
                raise PolicyError(f"opa {self.url}{path}: HTTP {status}: {payload[:300].decode()}")
            return orjson.loads(payload) if payload else None
        raise AssertionError("unreachable")

    def install(self) -> None:
        """Upload the batch module (idempotent: the same id replaces it)."""
        self._request("PUT", f"/v1/policies/{POLICY_ID}", BATCH_POLICY.read_bytes(), "text/plain")

    def put_config(self, document: dict[str, Any]) -> None:
        """Write the rendered configuration as `data.fleetplane.config`, with the marker."""
        self.put_data("fleetplane/config", {**document, "replay_marker": self.marker})

    def put_data(self, path: str, document: Any) -> None:
        self.stats.data_writes += 1
        self._request(
            "PUT", f"/v1/data/{path.strip('/')}", orjson.dumps(document), "application/json"
        )

    def evaluate(
        self,
        *,
        admission: Sequence[tuple[dict[str, Any], int]] = (),
        spend: dict[str, Any] | None = None,
        reclaim: Sequence[dict[str, Any]] = (),
        preempt: Sequence[dict[str, Any]] = (),
    ) -> Answers:
        """Answers in input order. `admission` holds (AdmissionReview, now in ns), reviewed
        with `spend` as `data.fleetplane.spend`."""
        if not admission and not reclaim and not preempt:
            return Answers()
        body = {
            "input": {
                "admission": [{"review": r, "now_ns": ns} for r, ns in admission],
                "spend": spend or {},
                "reclaim": list(reclaim),
                "preempt": list(preempt),
            }
        }
        began = time.perf_counter()
        answer = self._request("POST", ANSWERS_PATH, orjson.dumps(body), "application/json")
        self.stats.seconds += time.perf_counter() - began
        self.stats.queries += 1
        self.stats.admission += len(admission)
        self.stats.reclaim += len(reclaim)
        self.stats.preempt += len(preempt)
        result = (answer or {}).get("result")
        if not isinstance(result, dict):
            raise PolicyError(
                f"opa {self.url}: data.replay.batch.answers is undefined (is the batch module "
                "installed and are the project's policies loaded?)"
            )
        if result.get("marker") != self.marker:
            raise PolicyError(
                f"opa {self.url}: data.fleetplane.config is not the replay's any more (another "
                "process wrote its own configuration into this OPA); run the replay again"
            )
        return Answers(
            admission=[
                _admission(r)
                for r in _ordered(result.get("admission"), len(admission), "admission")
            ],
            reclaim=[
                _decision(r) for r in _ordered(result.get("reclaim"), len(reclaim), "reclaim")
            ],
            preempt=[
                _decision(r) for r in _ordered(result.get("preempt"), len(preempt), "preempt")
            ],
        )


class KeepAliveConnection:
    """One keep-alive HTTP/1.1 connection, just enough of the protocol for OPA's REST API:
    the request goes out in one send (no Nagle wait between headers and body), the answer is
    read by Content-Length or chunked transfer coding. http.client costs several times more
    Python time per query, which the replay pays for tens of thousands of small queries."""

    def __init__(self, host: str, port: int, timeout: float) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = self.sock.makefile("rb")

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def exchange(self, request: bytes) -> tuple[int, bytes, bool]:
        """Send one request; the status and body of its response, and whether the connection
        stays open. OSError or ValueError when the connection broke or the answer is not
        HTTP/1.1 as expected."""
        self.sock.sendall(request)
        reader = self.reader
        status_line = reader.readline(65537)
        parts = status_line.split(None, 2)
        if len(parts) < 2 or not parts[0].startswith(b"HTTP/1."):
            raise ValueError(f"not an HTTP response: {status_line[:80]!r}")
        status = int(parts[1])
        length: int | None = None
        chunked = closing = False
        while True:
            line = reader.readline(65537)
            if line in (b"\r\n", b"\n"):
                break
            if not line:
                raise ValueError("connection closed in the response headers")
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                length = int(value)
            elif name == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
            elif name == b"connection":
                closing = b"close" in value.lower()
        if status in (204, 304) or 100 <= status < 200:
            body = b""  # no body, whatever the headers say
        elif chunked:
            pieces = []
            while True:
                size = int(reader.readline(65537).split(b";", 1)[0], 16)
                if size == 0:
                    while reader.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass  # trailers
                    break
                pieces.append(_exactly(reader, size))
                reader.readline(65537)  # the CRLF after each chunk
            body = b"".join(pieces)
        elif length is not None:
            body = _exactly(reader, length)
        else:
            body = reader.read()  # no length: the body runs to the end of the connection
            closing = True
        return status, body, not closing


def _exactly(reader: Any, size: int) -> bytes:
    data = reader.read(size)
    if len(data) != size:
        raise ValueError(f"connection closed after {len(data)} of {size} body bytes")
    return data


def _ordered(pairs: Any, expected: int, what: str) -> list[Any]:
    found: dict[int, Any] = {}
    for pair in pairs or ():
        if isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], int):
            found[pair[0]] = pair[1]
    missing = [i for i in range(expected) if i not in found]
    if missing:
        raise PolicyError(f"opa gave no {what} answer for input(s) {missing[:10]}")
    return [found[i] for i in range(expected)]


def _admission(response: Any) -> Admission:
    if not isinstance(response, dict) or not isinstance(response.get("allowed"), bool):
        raise PolicyError(f"admission response without a boolean `allowed`: {response!r:.300}")
    message = ((response.get("status") or {}).get("message")) or ""
    return Admission(
        allowed=response["allowed"],
        messages=tuple(m for m in message.split("\n") if m),
        warnings=tuple(str(w) for w in response.get("warnings") or ()),
    )


def _decision(result: Any) -> Decision:
    # The same reading as the controller's (controller.act.opa.Opa.decide): no boolean
    # `allow`, no decision.
    if not isinstance(result, dict) or not isinstance(result.get("allow"), bool):
        raise PolicyError(f"decision without a boolean `allow`: {result!r:.300}")
    reasons = result.get("reasons")
    return Decision(
        allow=result["allow"],
        reasons=tuple(str(r) for r in reasons) if isinstance(reasons, list) else (),
    )
