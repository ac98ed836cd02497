"""A small Kubernetes API client: `requests` with the kubeconfig's credentials; pods and nodes
listed as protobuf, other lists parsed by simdjson, everything else by orjson.

Why not the official client's models: listing goes through `ApiClient.deserialize`, which builds
a typed model object per nested field; at fleet scale that dominates a pass. Measured with
`bench/controller_pass.py --decode-only` on this project's local control plane (kube-apiserver
v1.36, kwok pods with one GPU container, about 3.5 KB of JSON each), listing the same 5,000 pods
in pages of 500, on a 2-core machine shared with other work (load average 13-16, so absolute
times are inflated; the ratios are what matters):

    5,000 pods (500 nodes)                                  load ~15   load ~13 (20,000 in cluster)
    kubernetes client, typed models (list_pod_for_all_...)   7.1 s       24.3 s
    kubernetes client, _preload_content=False + orjson       1.9 s        6.1 s
    requests + orjson (the first version of this module)     2.1 s       10.6 s (noisy)

Where a 5,000-node, 50,000-pod snapshot goes (2 cores shared with other work; CPU seconds are
less inflated by the load than wall time, and the API server's share comes from its pprof
profile, since kwok's node heartbeats keep it busy too):

    one namespace of pods, 2,700-4,400 pods, client CPU per pod   load 6-8
      orjson, whole objects, then the views                       59-101 us
      simdjson parse, then only the fields the views read         52-65 us (parse alone 3-4 us)
    whole snapshot (55,000 objects, 120 requests)                 load 5.5
      wall                                                        8.9 s
      this process: CPU (sequentially: read 1.0, parse 0.2,
        views 2.7; the rest is threads)                           5.3 s
      API server: serving the lists (of which JSON encoding 2.9)  3.4 s
    earlier code on the same cluster (16,000-21,000 pods)         load 8-9
      client CPU, old / now                                       4.2-4.4 s / 2.0-2.8 s
    one namespace list (6 MiB), API server CPU, gzip / identity    1.0, 0.5 / 0.55, 0.34 s
    all 50,000 pods in one request, JSON / protobuf               175 / 108 MiB, 16-24 / 4-9 s

So this process, which runs on one core (the GIL), is the larger half, and most of it is turning
the needed fields into Python objects; the API server's JSON encoding is the other. Lists ask
for identity encoding: gzip costs the server more CPU than it saves on loopback or in-cluster.

Pods and nodes are therefore listed as Kubernetes protobuf (`list_protobuf`; the messages come
from modules generated from k8s.io/api's .proto files, `k8s_pb`, and `observe.proto` builds the
same views from them); namespaces, PDBs, PriorityClasses and CRDs (which have no protobuf) stay
JSON. `take_snapshot` on the same cluster (5,000 nodes, 39,938 accelerator pods of about 50,000,
120 requests), JSON (pods and nodes as before) and protobuf alternating, each in a fresh
process, load average 7.6-8.6 (another benchmark running):

    take_snapshot                            JSON                 protobuf
      wall                                   5.7, 12.0, 10.5 s    3.9, 3.5, 2.8 s
      this process, CPU                      3.3, 3.6, 3.4 s      2.6, 2.3, 2.2 s
      API server, CPU (/proc, incl. kwok's
        heartbeats meanwhile)                3.6, 5.9, 5.7 s      1.4, 1.4, 1.4 s
    one namespace, 4,938 pods (load ~8)
      client CPU per pod: parse / views      3-4 / 52-65 us       5.5 / 24-29 us
    the same protobuf pods listed one namespace at a time, no threads: 1.9 CPU-s, of which
      reading the answers 0.5, parsing (upb) 0.2, the views about 1.2

A protobuf answer is the magic `k8s\\0` and a `runtime.Unknown` whose `raw` is the list; a
server may answer JSON instead (the Accept header offers both), which goes down the JSON path.
Objects are parsed one page at a time (simdjson, one parser per page; or upb) and slimmed into
`observe.model` views, so memory holds a few pages of raw answers at a time.

Lists are paginated (`limit`/`continue`); an expired continue token (410) restarts the list once.
A page the watch cache cannot serve yet (504 "Too large resource version", observe/cache_lag.py)
is asked again within the pass, up to three tries.
Every request is counted (`requests_made`) for the pass summary. Errors are classified into
`TemporaryError` (timeouts, connection errors, 5xx, 409, 429) and `PermanentError` (the rest).
"""

from __future__ import annotations

import builtins
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, TypeVar
from urllib.parse import quote

import orjson
import requests
import simdjson
from google.protobuf import json_format
from google.protobuf import message as protobuf_message
from requests.adapters import HTTPAdapter

from controller.errors import (
    ConflictError,
    NotFoundError,
    PermanentError,
    TemporaryError,
    TooManyRequestsError,
)
from controller.log import Log
from controller.observe.cache_lag import (
    CacheBehindError,
    retry_after,
    too_large_resource_version,
    while_cache_behind,
)
from controller.observe.credentials import Credentials, resolve_credentials
from controller.observe.k8s_pb import meta_v1_pb2, runtime_pb2

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
PROTOBUF = "application/vnd.kubernetes.protobuf"
PROTOBUF_MAGIC = b"k8s\x00"
DEFAULT_PAGE = 500
T = TypeVar("T")


def _namespace_terminating(response: requests.Response) -> bool:
    """Whether a 403 says the namespace is being deleted (the Status cause
    `NamespaceTerminating` the API server gives to creations in it)."""
    try:
        status = response.json()
    except ValueError:
        return False
    causes = (status.get("details") or {}).get("causes") or []
    if any(cause.get("type") == "NamespaceTerminating" for cause in causes):
        return True
    # NamespaceLifecycle's own words, for servers that answer without the cause
    return "because it is being terminated" in str(status.get("message", ""))


def _status_of(response: requests.Response) -> dict[str, Any]:
    """The Status an error answer carries, as its JSON fields (a protobuf Status, the answer
    to a protobuf list, turned into the same dict); empty when it carries none."""
    if _content_type(response) == PROTOBUF:
        try:
            status = _unwrap(response.content, meta_v1_pb2.Status, "error")
        except PermanentError:
            return {}
        return json_format.MessageToDict(status, preserving_proto_field_name=True)
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        return {}
    return body if isinstance(body, dict) else {}


def _status_message(response: requests.Response, status: dict[str, Any]) -> str:
    """The `message` of the answer's Status; else the start of the body."""
    if status.get("message"):
        return str(status["message"])
    if _content_type(response) == PROTOBUF:
        return repr(response.content[:300])
    return response.text[:300]


def _content_type(response: requests.Response) -> str:
    return response.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()


def _unwrap(body: bytes, message_type: Any, where: str) -> Any:
    """A Kubernetes protobuf answer: the magic `k8s\\0`, then a `runtime.Unknown` whose `raw`
    is the object, here of `message_type` (whose name must be the Unknown's kind)."""
    if body[:4] != PROTOBUF_MAGIC:
        raise PermanentError(f"{where}: not a Kubernetes protobuf answer: {body[:20]!r}")
    try:
        envelope = runtime_pb2.Unknown.FromString(body[4:])
        kind = envelope.typeMeta.kind
        expected = message_type.DESCRIPTOR.name
        if kind and kind != expected:
            raise PermanentError(f"{where}: expected a {expected}, got a {kind}")
        return message_type.FromString(envelope.raw)
    except protobuf_message.DecodeError as error:
        raise PermanentError(f"{where}: malformed protobuf: {error}") from error


@dataclass(frozen=True, slots=True)
class _Page:
    """One page of a list, decoded: its items, the converter for them, the continue token and
    the list's resourceVersion (every page of a list is read at its first page's version)."""

    items: Iterable[Any]
    convert: Callable[[Any], Any]
    token: str | None
    version: str = ""


@dataclass(frozen=True, slots=True)
class Listed(Generic[T]):
    """Every object of a list, converted, and the resourceVersion it was read at: a watch from
    that version sees every change after the list (observe/watched.py)."""

    items: builtins.list[T]
    version: str


def label_selector(labels: Mapping[str, str]) -> str:
    """Equality labels as the API server's `labelSelector` parameter takes them (`a=1,b=2`)."""
    return ",".join(f"{key}={value}" for key, value in labels.items())


def continued(query: dict[str, Any], token: str) -> dict[str, Any]:
    """The query of a list's next page: its `continue` token, which carries the list's
    resourceVersion, so without `resourceVersion` and `resourceVersionMatch` (the API server
    refuses a continue with either: 422)."""
    rest = {k: v for k, v in query.items() if k not in ("resourceVersion", "resourceVersionMatch")}
    return {**rest, "continue": token}


class KubeClient:
    """Thread-safe; one `requests.Session` with a connection pool sized for parallel lists."""

    def __init__(self, creds: Credentials, *, timeout: float = 30.0, pool: int = 16) -> None:
        self.server = creds.server
        self.timeout = timeout
        self._session = requests.Session()
        adapter = HTTPAdapter(pool_connections=pool, pool_maxsize=pool)
        self._session.mount("https://", adapter)
        self._session.mount("http://", adapter)
        # Passed with every request: requests lets $REQUESTS_CA_BUNDLE override a session's
        # `verify`, which would replace the cluster's CA with the system store.
        self._verify: bool | str = False if creds.insecure else (creds.ca_file or True)
        if creds.cert_file and creds.key_file:
            self._session.cert = (creds.cert_file, creds.key_file)
        self._session.headers["Accept"] = JSON
        # The API server gzips answers over 128 KiB when asked; compressing a 50,000-pod list
        # costs it about as much CPU as encoding it (measured, see the module doc), and the
        # controller runs next to it: ask for plain JSON.
        self._session.headers["Accept-Encoding"] = "identity"
        self._session.headers["User-Agent"] = "fleetplane-controller"
        if creds.token:
            self._session.headers["Authorization"] = f"Bearer {creds.token}"
        self._lock = threading.Lock()
        self._log = Log()
        self.requests_made = 0

    @classmethod
    def from_kubeconfig(cls, kubeconfig: str | None, **kwargs: Any) -> KubeClient:
        return cls(resolve_credentials(kubeconfig), **kwargs)

    def close(self) -> None:
        self._session.close()

    # raw ------------------------------------------------------------------------------------

    def request(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        raw: bool = False,
    ) -> Any:
        """Send one request; the decoded JSON answer (`raw`: its bytes), or a classified
        error."""
        response = self._send(method, path, params=params, body=body, content_type=content_type)
        if raw:
            return response.content
        if not response.content:
            return None
        try:
            return orjson.loads(response.content)
        except orjson.JSONDecodeError as error:
            raise PermanentError(
                f"{method} {self.server}{path}: answer is not JSON: {error}: "
                f"{response.content[:100]!r}"
            ) from error

    def _object(self, method: str, path: str, answer: Any) -> dict[str, Any]:
        """An answer that must be one Kubernetes object."""
        if not isinstance(answer, dict):
            raise PermanentError(
                f"{method} {self.server}{path}: answer is not a JSON object but "
                f"{type(answer).__name__}"
            )
        return answer

    def _send(
        self,
        method: str,
        path: str,
        *,
        params: dict[str, Any] | None = None,
        body: Any = None,
        content_type: str = JSON,
        accept: str | None = None,
        stream: bool = False,
        timeout: float | tuple[float, float] | None = None,
    ) -> requests.Response:
        """Send one request; its (2xx) response, or a classified error. `stream`: the body is
        read as it arrives (a watch), `timeout` then bounds the wait between two reads."""
        with self._lock:
            self.requests_made += 1
        data = None if body is None else orjson.dumps(body)
        headers = {"Content-Type": content_type} if data is not None else {}
        if accept:
            headers["Accept"] = accept
        timeout = self.timeout if timeout is None else timeout
        try:
            response = self._session.request(
                method,
                self.server + path,
                params=params,
                data=data,
                headers=headers or None,
                timeout=timeout,
                verify=self._verify,
                stream=stream,
            )
        except requests.Timeout as error:
            limit = (
                f"({timeout[0]}s to connect, {timeout[1]}s between reads)"
                if isinstance(timeout, tuple)
                else f"after {timeout}s"
            )
            raise TemporaryError(f"{method} {path}: timed out {limit}") from error
        except requests.ConnectionError as error:
            raise TemporaryError(f"{method} {path}: cannot connect: {error}") from error
        except requests.exceptions.ChunkedEncodingError as error:
            # The answer was cut short (an API server past its request timeout while sending a
            # large list): temporary, as a timeout is, never a traceback out of the pass.
            raise TemporaryError(f"{method} {path}: the answer ended prematurely") from error
        status = response.status_code
        if 200 <= status < 300:
            return response
        answer = _status_of(response)
        message = f"{method} {path}: HTTP {status}: {_status_message(response, answer)}"
        if status == 404 or (status == 403 and _namespace_terminating(response)):
            # content of a namespace being deleted is going away with it: gone, not refused
            raise NotFoundError(message)
        if status == 409:
            raise ConflictError(message)
        if status == 429:
            raise TooManyRequestsError(message)
        if status == 504 and too_large_resource_version(answer):
            raise CacheBehindError(message, retry_after=retry_after(answer))
        if status >= 500 or status == 408:
            raise TemporaryError(message)
        raise PermanentError(message)

    def list_pages(
        self, path: str, *, limit: int = DEFAULT_PAGE, params: dict[str, Any] | None = None
    ) -> Iterator[list[dict[str, Any]]]:
        """Pages of `items` of a list, following `continue` tokens."""
        token: str | None = None
        restarted = False
        while True:
            query = {"limit": limit, **(params or {})}
            if token:
                query = continued(query, token)
            try:
                page = self._list_request(partial(self.request, "GET", path, params=query), path)
            except PermanentError as error:
                if "HTTP 410" in str(error) and token and not restarted:
                    # The continue token expired: start the list again, once.
                    restarted, token = True, None
                    continue
                raise
            page = self._object("GET", path, page)
            items = page.get("items") or []
            metadata = page.get("metadata") or {}
            if not isinstance(items, list) or not isinstance(metadata, dict):
                raise PermanentError(
                    f"GET {self.server}{path}: not a list object (items or metadata malformed)"
                )
            yield items
            token = metadata.get("continue")
            if not token:
                return

    def watch(
        self, path: str, *, resource_version: str, timeout_seconds: int
    ) -> Iterator[dict[str, Any]]:
        """The events of one watch of a collection from `resource_version` (`{"type",
        "object"}`; BOOKMARK events carry only a newer resourceVersion, to watch from next),
        until the API server ends it after `timeout_seconds` or the caller stops reading. An
        ERROR event (410: the version is too old) is a TemporaryError: list again, then watch
        from the new version."""
        params: dict[str, str | int] = {
            "watch": "true",
            "resourceVersion": resource_version,
            "allowWatchBookmarks": "true",
            "timeoutSeconds": timeout_seconds,
        }
        response = self._send(
            "GET",
            path,
            params=params,
            stream=True,
            # connect within the client's timeout; between events, up to the watch's own
            timeout=(self.timeout, timeout_seconds + self.timeout),
        )
        with response:
            try:
                for line in response.iter_lines():
                    if not line:
                        continue
                    event = orjson.loads(line)
                    kind = event.get("type")
                    if kind == "ERROR":
                        status = event.get("object") or {}
                        raise TemporaryError(
                            f"WATCH {path}: {status.get('code')} {status.get('message')}"
                        )
                    yield event
            except requests.RequestException as error:
                raise TemporaryError(f"WATCH {path}: the watch broke: {error}") from error
            except orjson.JSONDecodeError as error:
                raise PermanentError(f"WATCH {path}: an event is not JSON: {error}") from error

    def list(self, path: str, **kwargs: Any) -> list[dict[str, Any]]:
        return [item for page in self.list_pages(path, **kwargs) for item in page]

    def list_objects(
        self,
        path: str,
        convert: Callable[[Any], T | None],
        *,
        limit: int = DEFAULT_PAGE,
        params: dict[str, Any] | None = None,
    ) -> builtins.list[T]:
        """Every object of a list, converted page by page; `None` from `convert` drops one.

        Each page is parsed by simdjson and `convert` receives its items as lazy objects: only
        the fields it reads become Python objects. The next page is requested (and parsed) in a
        second thread while this one converts the current page, so the API server encodes one
        page while this process reads the previous one. An expired continue token (410) starts
        the list again once, discarding what was converted."""

        def decode(response: requests.Response) -> _Page:
            return self._json_page(path, response.content, convert)

        return self._list(path, JSON, decode, limit=limit, params=params).items

    def list_protobuf(
        self,
        path: str,
        list_type: Any,
        convert: Callable[[Any], T | None],
        convert_json: Callable[[Any], T | None],
        *,
        limit: int = DEFAULT_PAGE,
        params: dict[str, Any] | None = None,
    ) -> builtins.list[T]:
        """`list_objects` of a built-in resource asked for as Kubernetes protobuf: `list_type`
        is the generated list message (`core_v1_pb2.PodList`), `convert` receives its items. A
        server that answers JSON instead (it may, for any page) gets its items converted by
        `convert_json`, as `list_objects` does; any other answer is a PermanentError."""
        return self.list_protobuf_at_version(
            path, list_type, convert, convert_json, limit=limit, params=params
        ).items

    def list_protobuf_at_version(
        self,
        path: str,
        list_type: Any,
        convert: Callable[[Any], T | None],
        convert_json: Callable[[Any], T | None],
        *,
        limit: int = DEFAULT_PAGE,
        params: dict[str, Any] | None = None,
    ) -> Listed[T]:
        """`list_protobuf`, with the resourceVersion the list was read at."""

        def decode(response: requests.Response) -> _Page:
            body = response.content
            content_type = _content_type(response)
            if content_type == PROTOBUF:
                page = _unwrap(body, list_type, f"GET {path}")
                token = getattr(page.metadata, "continue")
                return _Page(page.items, convert, token or None, page.metadata.resourceVersion)
            if content_type == JSON:
                return self._json_page(path, body, convert_json)
            raise PermanentError(
                f"GET {path}: expected protobuf or JSON, got {content_type or 'no Content-Type'}:"
                f" {body[:20]!r}"
            )

        return self._list(path, f"{PROTOBUF}, {JSON}", decode, limit=limit, params=params)

    def _list(
        self,
        path: str,
        accept: str,
        decode: Callable[[requests.Response], _Page],
        *,
        limit: int,
        params: dict[str, Any] | None,
    ) -> Listed[Any]:
        """The paging of `list_objects` and `list_protobuf`: `decode` turns an answer into a
        page (in the prefetch thread); its items are converted in this one."""
        query = {"limit": limit, **(params or {})}

        def fetch(query: dict[str, Any]) -> _Page:
            ask = partial(self._send, "GET", path, params=query, accept=accept)
            return decode(self._list_request(ask, path))

        for attempt in (1, 2):
            kept: builtins.list[Any] = []
            version = ""
            try:
                with ThreadPoolExecutor(max_workers=1) as prefetch:
                    pending = prefetch.submit(fetch, query)
                    while True:
                        page = pending.result()
                        token = page.token
                        version = version or page.version
                        if token:
                            pending = prefetch.submit(fetch, continued(query, token))
                        convert = page.convert
                        for raw in page.items:
                            converted = convert(raw)
                            if converted is not None:
                                kept.append(converted)
                        del page
                        if not token:
                            return Listed(kept, version)
            except PermanentError as error:
                if "HTTP 410" in str(error) and attempt == 1:
                    continue
                raise
        raise AssertionError("unreachable")

    def _list_request(self, ask: Callable[[], T], path: str) -> T:
        """One request of a list (a page), asked again
        while the watch cache is behind etcd (observe/cache_lag.py)."""
        return while_cache_behind(ask, path, self._log)

    @staticmethod
    def _json_page(path: str, body: bytes, convert: Callable[[Any], Any]) -> _Page:
        """One page of a JSON list, parsed (simdjson, one parser per page so pages outlive
        each other)."""
        try:
            document: Any = simdjson.Parser().parse(body)
        except ValueError as error:
            raise PermanentError(f"GET {path}: not JSON: {error}") from error
        if not hasattr(document, "as_dict"):
            raise PermanentError(f"GET {path}: expected a list object")
        items = document.get("items")
        if items is not None and not hasattr(items, "as_list"):
            raise PermanentError(f"GET {path}: items is not an array")
        metadata = document.get("metadata") or {}
        token = metadata.get("continue") if hasattr(metadata, "get") else None
        version = metadata.get("resourceVersion") if hasattr(metadata, "get") else None
        return _Page(
            items or (),
            convert,
            token if isinstance(token, str) and token else None,
            version if isinstance(version, str) else "",
        )

    # typed helpers -------------------------------------------------------------------------

    def get(self, path: str) -> dict[str, Any]:
        return self._object("GET", path, self.request("GET", path))

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        return self._object("POST", path, self.request("POST", path, body=body))

    def merge_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        """JSON merge patch; put `metadata.resourceVersion` in it for a 409 on a stale read."""
        return self._object(
            "PATCH", path, self.request("PATCH", path, body=patch, content_type=MERGE_PATCH)
        )

    def strategic_patch(self, path: str, patch: dict[str, Any]) -> dict[str, Any]:
        """Strategic merge patch: lists with a merge key (a node's taints by `key`, its
        conditions by `type`) are merged element by element instead of replaced."""
        return self._object(
            "PATCH", path, self.request("PATCH", path, body=patch, content_type=STRATEGIC_PATCH)
        )

    def delete(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.request("DELETE", path, body=body)

    def evict(self, namespace: str, name: str, *, uid: str, grace_seconds: int | None) -> None:
        """policy/v1 Eviction of this pod and no other: PodDisruptionBudgets are checked (429
        means one forbids it), and the uid is a precondition, so a pod recreated under the same
        name since it was judged is not evicted (409, `ConflictError`)."""
        options: dict[str, Any] = {"preconditions": {"uid": uid}}
        if grace_seconds is not None:
            options["gracePeriodSeconds"] = grace_seconds
        body: dict[str, Any] = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": name, "namespace": namespace},
            "deleteOptions": options,
        }
        self.request("POST", f"{pod_path(namespace, name)}/eviction", body=body)


def _q(name: str) -> str:
    return quote(name, safe="")


def pod_path(namespace: str, name: str | None = None) -> str:
    base = f"/api/v1/namespaces/{_q(namespace)}/pods"
    return f"{base}/{_q(name)}" if name else base


def namespace_path(name: str) -> str:
    return f"/api/v1/namespaces/{_q(name)}"


def object_path(api_version: str, plural: str, namespace: str | None, name: str | None) -> str:
    """Path of a resource: `v1` is the core group, anything else `/apis/<group>/<version>`."""
    root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    ns = f"/namespaces/{_q(namespace)}" if namespace else ""
    tail = f"/{_q(name)}" if name else ""
    return f"{root}{ns}/{plural}{tail}"
