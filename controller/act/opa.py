"""OPA: the decisions the controller asks for, and the documents it publishes.

Decisions are `POST /v1/data/fleetplane/decisions/<name>` with `{"input": ...}`; the answer's
`result` must carry a boolean `allow` and a list of `reasons` (docs/contracts.md). Anything else
(OPA unreachable, 5xx, an undefined or malformed result) is an error, never an allow. The
documents it keeps (spend, reservations, workload records, approval bindings) are written with
`PUT /v1/data/<path>` when OPA is one server (`put_data`); to each replica of the in-cluster
OPA Service by its pod address, its certificate verified for the Service's name
(`put_data_to`).

Every request carries the controller's bearer token (`Authorization: Bearer`), read from the
file the configuration names (`controller.opa_token_file`, the Secret the CronJob mounts): OPA
runs with `--authentication=token --authorization=basic`, and its `system.authz` policy lets
the controller's role ask for decisions and write the documents it keeps, nothing else. A
token file that is missing, unreadable or empty is a permanent error (no pass can work
without it); OPA refusing the token (401) is one too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import requests
from requests.adapters import HTTPAdapter

from controller.act.opa_patch import document_ops, write_whole
from controller.errors import PermanentError, TemporaryError
from controller.observe.endpoints import Endpoint

SPEND_PATH = "fleetplane/spend"


@dataclass(frozen=True, slots=True)
class Decision:
    """recheck_at, revision: what a decision that says how long it holds carries (the
    disruption decision: docs/contracts.md); `recheck_said` when the answer gave `recheck_at`
    (a whole number, or null: never), None and False where it does not say."""

    allow: bool
    reasons: tuple[str, ...]
    recheck_at: int | None = None
    recheck_said: bool = False
    revision: str | None = None

    def because(self) -> str:
        return "; ".join(self.reasons) or ("allowed" if self.allow else "denied")


def decision_of(result: Any) -> Decision | None:
    """A decision's `result` as a Decision; None unless it carries a boolean `allow`."""
    if not isinstance(result, dict) or not isinstance(result.get("allow"), bool):
        return None
    reasons = result.get("reasons")
    recheck_at, revision = result.get("recheck_at"), result.get("revision")
    return Decision(
        allow=result["allow"],
        reasons=tuple(str(r) for r in reasons) if isinstance(reasons, list) else (),
        recheck_at=recheck_at if type(recheck_at) is int else None,
        recheck_said=type(recheck_at) is int or ("recheck_at" in result and recheck_at is None),
        revision=revision if isinstance(revision, str) else None,
    )


def read_token(path: str) -> str:
    """The bearer token in `path` (surrounding whitespace dropped); PermanentError naming the
    file when it cannot be read or holds no token."""
    try:
        token = Path(path).read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        raise PermanentError(f"OPA token file {path}: cannot read: {error}") from error
    if not token:
        raise PermanentError(f"OPA token file {path}: empty, no bearer token in it")
    if any(c.isspace() for c in token):
        raise PermanentError(f"OPA token file {path}: holds more than one token (whitespace)")
    return token


class Opa:
    """token_file: the controller's bearer token for OPA; None sends none (an OPA without
    authorization: the tests' servers, a replay)."""

    def __init__(
        self,
        url: str,
        *,
        ca_file: str | None = None,
        token_file: str | None = None,
        timeout: float = 10.0,
    ) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.ca_file = ca_file
        self._headers = {"Content-Type": "application/json"}
        if token_file is not None:
            self._headers["Authorization"] = f"Bearer {read_token(token_file)}"
        self._session = requests.Session()
        self._verify: bool | str = ca_file or True  # per request: see observe.kube
        self.requests_made = 0

    def close(self) -> None:
        self._session.close()

    def decide(self, name: str, input: dict[str, Any]) -> Decision:
        url = f"{self.url}/v1/data/fleetplane/decisions/{name}"
        found = decision_of(self._ask(url, input))
        if found is None:
            raise PermanentError(f"opa {url}: no boolean `allow` in the answer (policy loaded?)")
        return found

    def decide_each(self, name: str, inputs: dict[str, dict[str, Any]]) -> dict[str, Decision]:
        """The decisions of many inputs in one request, by their keys: the policy's
        `decisions` rule (`{"pods": inputs}` in, `decision` of each out). A key whose answer is
        missing or malformed is absent (no answer); a result that is no object is an error."""
        url = f"{self.url}/v1/data/fleetplane/decisions/{name}/decisions"
        result = self._ask(url, {"pods": inputs})
        if not isinstance(result, dict):
            raise PermanentError(
                f"opa {url}: no object of decisions in the answer (policy loaded?)"
            )
        found = {key: decision_of(result.get(key)) for key in inputs}
        return {key: decision for key, decision in found.items() if decision is not None}

    def revision(self) -> str | None:
        """`data.fleetplane.revision`: the revision of the policies and data OPA loaded (the
        policy gate's component writes it with them); None when OPA has none (a test's or a
        hand-run OPA) or it is not a string."""
        value = self.get_data("fleetplane/revision")
        return value if isinstance(value, str) else None

    def _ask(self, url: str, input: dict[str, Any]) -> Any:
        """POST `input` to a decision's `url`; the answer's `result` (None when undefined)."""
        self.requests_made += 1
        try:
            response = self._session.post(
                url,
                data=orjson.dumps({"input": input}),
                headers=self._headers,
                timeout=self.timeout,
                verify=self._verify,
            )
        except requests.RequestException as error:
            raise TemporaryError(f"opa {url}: {error}") from error
        _raise_unless(response, 200, f"opa {url}")
        try:
            answer = orjson.loads(response.content)
        except orjson.JSONDecodeError as error:
            raise PermanentError(f"opa {url}: answer is not JSON: {error}") from error
        if not isinstance(answer, dict):
            raise PermanentError(
                f"opa {url}: answer is not a JSON object but {type(answer).__name__}"
            )
        return answer.get("result")

    def put_data(self, path: str, document: Any, *, what: str | None = None) -> None:
        """Replace the document at `data.<path>` (slashes) through OPA's Data API, `PUT
        /v1/data/<path>` (one HTTP request needs no client library; opa-python-client pulled
        aiohttp into the controller's image for this one call). `what` names it in errors."""
        self.requests_made += 1
        url = f"{self.url.rstrip('/')}/v1/data/{path}"
        doing = f"publishing {what or path}"
        try:
            response = requests.put(
                url,
                data=orjson.dumps(document),
                headers=self._headers,
                timeout=self.timeout,
                verify=self._verify,
            )
        except requests.RequestException as error:
            raise TemporaryError(f"opa {self.url}: {doing}: {error}") from error
        _raise_unless(response, 204, f"opa {self.url}: {doing}")

    def get_data(self, path: str) -> Any:
        """The document at `data.<path>` (None when undefined): `GET /v1/data/<path>`."""
        self.requests_made += 1
        url = f"{self.url.rstrip('/')}/v1/data/{path}"
        try:
            response = self._session.get(
                url, headers=self._headers, timeout=self.timeout, verify=self._verify
            )
        except requests.RequestException as error:
            raise TemporaryError(f"opa {self.url}: reading {path}: {error}") from error
        _raise_unless(response, 200, f"opa {url}")
        try:
            answer = orjson.loads(response.content)
        except orjson.JSONDecodeError as error:
            raise PermanentError(f"opa {url}: answer is not JSON: {error}") from error
        return answer.get("result") if isinstance(answer, dict) else None

    def put_data_to(self, path: str, document: Any, endpoints: list[Endpoint]) -> list[str]:
        """Replace `data.<path>` on each replica at its pod address, with the scheme of `url`
        and, for https, the certificate checked against `url`'s host name (the Service's,
        which the serving certificate names; a pod address is in no certificate). Every replica
        is tried; returns what failed, one line each (empty when all took the document)."""
        return self._to_each("PUT", path, orjson.dumps(document), endpoints, done=(204,))

    def delete_data_from(self, path: str, endpoints: list[Endpoint]) -> list[str]:
        """Delete `data.<path>` on each replica, as `put_data_to` writes it; a replica that
        holds nothing there (404) is done. Returns what failed, one line each."""
        return self._to_each("DELETE", path, b"", endpoints, done=(204, 404))

    def _to_each(
        self, method: str, path: str, body: bytes, endpoints: list[Endpoint], done: tuple[int, ...]
    ) -> list[str]:
        parts = urlsplit(self.url)
        failed: list[str] = []
        with requests.Session() as session:
            if parts.scheme == "https" and parts.hostname:
                session.mount("https://", _NamedHostAdapter(parts.hostname))
            for endpoint in endpoints:
                self.requests_made += 1
                url = f"{parts.scheme}://{endpoint.host}:{endpoint.port}/v1/data/{path}"
                try:
                    response = session.request(
                        method,
                        url,
                        data=body,
                        headers=self._headers,
                        timeout=self.timeout,
                        verify=self._verify,
                    )
                except requests.RequestException as error:
                    failed.append(f"{endpoint}: {error}")
                    continue
                if response.status_code not in done:
                    failed.append(
                        f"{endpoint}: HTTP {response.status_code}: {response.text[:200]}"
                        + _refusal(response.status_code)
                    )
        return failed

    def sync_data(
        self, path: str, document: Any, depth: int, endpoints: list[Endpoint] | None = None
    ) -> tuple[list[str], int]:
        """Bring `data.<path>` of OPA (`endpoints`: of each replica at its pod address, as
        `put_data_to`) to `document` by writing what differs from what it holds (controller/
        act/opa_patch.py): a GET, then a PATCH of the changed entries (none when nothing
        changed), or a PUT of the whole document where it holds none, the difference is
        large (controller/act/opa_patch.py `write_whole`) or the PATCH is refused (another
        writer changed it in between). Returns (what failed, one line per target;
        the operations written)."""
        parts = urlsplit(self.url)
        targets = (
            [self.url]
            if endpoints is None
            else [f"{parts.scheme}://{e.host}:{e.port}" for e in endpoints]
        )
        failed: list[str] = []
        written = 0
        with requests.Session() as session:
            if endpoints is not None and parts.scheme == "https" and parts.hostname:
                session.mount("https://", _NamedHostAdapter(parts.hostname))
            for base in targets:
                try:
                    written += self._sync_one(session, f"{base}/v1/data/{path}", document, depth)
                except (requests.RequestException, _Refused) as error:
                    failed.append(f"{base}: {error}")
        return failed, written

    def _sync_one(self, session: requests.Session, url: str, document: Any, depth: int) -> int:
        def send(method: str, body: bytes, content_type: str) -> requests.Response:
            self.requests_made += 1
            headers = {**self._headers, "Content-Type": content_type}
            return session.request(
                method, url, data=body, headers=headers, timeout=self.timeout, verify=self._verify
            )

        held = send("GET", b"", "application/json")
        if held.status_code != 200:
            raise _Refused(held)
        current = orjson.loads(held.content).get("result")
        ops = document_ops(current, document, depth)
        if not ops:
            return 0
        if not write_whole(ops):
            patched = send("PATCH", orjson.dumps(ops), "application/json-patch+json")
            if patched.status_code == 204:
                return len(ops)
        put = send("PUT", orjson.dumps(document), "application/json")
        if put.status_code != 204:
            raise _Refused(put)
        return 1

    def sync_data_here(self, path: str, document: Any, depth: int, *, what: str) -> int:
        """`sync_data` of the one server at `url`: a failure is a TemporaryError (OPA down, a
        5xx) or a PermanentError (a refusal), as `put_data`'s. The operations written."""
        doing = f"publishing {what}"
        try:
            with requests.Session() as session:
                return self._sync_one(session, f"{self.url}/v1/data/{path}", document, depth)
        except requests.RequestException as error:
            raise TemporaryError(f"opa {self.url}: {doing}: {error}") from error
        except _Refused as refused:
            _raise_unless(refused.response, -1, f"opa {self.url}: {doing}")
            raise


class _Refused(Exception):
    """OPA refused a read or a write: its answer."""

    def __init__(self, response: requests.Response) -> None:
        self.response = response
        status = response.status_code
        super().__init__(f"HTTP {status}: {response.text[:200]}{_refusal(status)}")


def _raise_unless(response: requests.Response, expected: int, where: str) -> None:
    """OPA's answer as an error unless its status is `expected`: a server error is temporary,
    anything else (a refusal, a missing policy) permanent, with what a refusal means."""
    status = response.status_code
    if status == expected:
        return
    message = f"{where}: HTTP {status}: {response.text[:200]}"
    if status >= 500:
        raise TemporaryError(message)
    raise PermanentError(message + _refusal(status))


def _refusal(status: int) -> str:
    """What a 401 from OPA means: its authorization policy refused the request."""
    if status != 401:
        return ""
    return (
        " (OPA's authorization refused the request: is controller.opa_token_file the token "
        "whose hash OPA's authz document gives the controller role?)"
    )


class _NamedHostAdapter(HTTPAdapter):
    """HTTPS to an address whose certificate names a host instead: SNI and the certificate
    check use `hostname`; the CA check is unchanged."""

    def __init__(self, hostname: str) -> None:
        self._hostname = hostname
        super().__init__()

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        kwargs["server_hostname"] = self._hostname
        kwargs["assert_hostname"] = self._hostname
        super().init_poolmanager(*args, **kwargs)
