"""A list the API server's watch cache cannot serve yet (HTTP 504 "Too large resource version",
its cache behind etcd) is asked again within the pass, a few times, then is a TemporaryError
naming the cause; any other 5xx fails at once, as before.

The real API server gives this answer on demand to a list at a version etcd has not reached
(`resourceVersionMatch=NotOlderThan`: only the watch cache serves it, and waits 3 s for it):
the integration tests ask it so, and make the version come by writing. A loopback server gives
the sequences a test needs exactly (the Status, then a page; the Status for a continue page;
other 5xx): the Status as the real server sends it, which is k8s.io/apiserver's
`storage.NewTooLargeResourceVersionError` (apimachinery's `NewTimeoutError` with a
`ResourceVersionTooLarge` cause, `retryAfterSeconds` 1 from the cacher), as JSON or, to a
protobuf list, as protobuf."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator

import orjson
import pytest

from controller.errors import TemporaryError
from controller.log import LOGGER_NAME
from controller.observe import cache_lag
from controller.observe.cache_lag import ATTEMPTS, CacheBehindError
from controller.observe.k8s_pb import core_v1_pb2, meta_v1_pb2
from controller.observe.kube import PROTOBUF, KubeClient, object_path
from controller.observe.model import node_from_api
from controller.observe.proto import NodeList, node_from_proto
from tests.controller.fake_api import Query, protobuf_body, serving

Answer = tuple[int, str, bytes]

TOO_LARGE = {
    "kind": "Status",
    "apiVersion": "v1",
    "metadata": {},
    "status": "Failure",
    "message": "Timeout: Too large resource version: 1042, current: 1017",
    "reason": "Timeout",
    "details": {
        "causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}],
        "retryAfterSeconds": 1,
    },
    "code": 504,
}


def too_large_json() -> Answer:
    return 504, "application/json", orjson.dumps(TOO_LARGE)


def too_large_protobuf() -> Answer:
    """The same Status as a kube-apiserver encodes it for a client that asked for protobuf."""
    status = meta_v1_pb2.Status(
        status="Failure",
        message=TOO_LARGE["message"],
        reason="Timeout",
        code=504,
        details=meta_v1_pb2.StatusDetails(
            causes=[
                meta_v1_pb2.StatusCause(
                    reason="ResourceVersionTooLarge", message="Too large resource version"
                )
            ],
            retryAfterSeconds=1,
        ),
    )
    return 504, PROTOBUF, protobuf_body(status, "Status")


def json_list(*names: str, token: str = "") -> Answer:
    items = [{"metadata": {"name": name}} for name in names]
    metadata = {"resourceVersion": "1042", **({"continue": token} if token else {})}
    return (
        200,
        "application/json",
        orjson.dumps({"kind": "List", "metadata": metadata, "items": items}),
    )


def node_page(*names: str, token: str = "") -> Answer:
    page = core_v1_pb2.NodeList()
    for name in names:
        page.items.add().metadata.name = name
    setattr(page.metadata, "continue", token)
    return 200, PROTOBUF, protobuf_body(page, "NodeList")


class Script:
    """Answers the GETs in order from a list of answers (the last one repeated), keeping
    the query of each."""

    def __init__(self, *answers: Answer | Callable[[], Answer]) -> None:
        self.answers = list(answers)
        self.queries: list[Query] = []

    def respond(self, _path: str, query: Query, _accept: str) -> Answer:
        self.queries.append(query)
        answer = self.answers[min(len(self.queries), len(self.answers)) - 1]
        return answer() if callable(answer) else answer


@pytest.fixture
def script() -> Iterator[tuple[Script, KubeClient]]:
    answers = Script()
    with serving(answers.respond) as client:
        yield answers, client


@pytest.fixture
def short_pauses(monkeypatch: pytest.MonkeyPatch) -> None:
    """Pauses of 10 ms instead of the server's 1 s, where the pause is not what is tested."""
    monkeypatch.setattr(cache_lag, "MAX_PAUSE", 0.01)


def test_a_list_the_watch_cache_is_behind_for_succeeds_when_asked_again(
    script: tuple[Script, KubeClient], caplog: pytest.LogCaptureFixture
) -> None:
    answers, client = script
    caplog.set_level("WARNING")
    answers.answers = [too_large_json, json_list("a", "b")]
    started = time.monotonic()
    names = [item["metadata"]["name"] for item in client.list("/api/v1/namespaces")]
    assert names == ["a", "b"]
    assert len(answers.queries) == 2
    # asked again after the server's retryAfterSeconds, not at once
    assert time.monotonic() - started >= 1.0
    retried = [r for r in caplog.records if r.msg == "observe.list-retried"]
    assert len(retried) == 1
    fields = retried[0].__dict__["fields"]
    assert fields["reason"] == "ResourceVersionTooLarge" and fields["attempt"] == 1
    assert fields["path"] == "/api/v1/namespaces"


@pytest.mark.usefixtures("short_pauses")
def test_each_list_path_asks_again(script: tuple[Script, KubeClient]) -> None:
    answers, client = script
    answers.answers = [too_large_json, json_list("a")]
    listed = client.list_objects("/api/v1/namespaces", lambda raw: str(raw["metadata"]["name"]))
    assert listed == ["a"] and len(answers.queries) == 2


@pytest.mark.usefixtures("short_pauses")
def test_a_protobuf_list_asks_again_for_the_page_the_cache_could_not_serve(
    script: tuple[Script, KubeClient],
) -> None:
    answers, client = script
    # the first page, then the Status as protobuf for the next, then that page
    answers.answers = [node_page("n1", token="next"), too_large_protobuf, node_page("n2")]
    nodes = client.list_protobuf("/api/v1/nodes", NodeList, node_from_proto, node_from_api)
    assert [node.name for node in nodes] == ["n1", "n2"]
    assert [q.get("continue") for q in answers.queries] == [None, ["next"], ["next"]]


@pytest.mark.usefixtures("short_pauses")
def test_a_cache_still_behind_after_the_tries_is_a_temporary_error_naming_it(
    script: tuple[Script, KubeClient],
) -> None:
    answers, client = script
    answers.answers = [too_large_protobuf]
    with pytest.raises(TemporaryError) as caught:
        client.list_protobuf("/api/v1/nodes", NodeList, node_from_proto, node_from_api)
    assert len(answers.queries) == ATTEMPTS
    message = str(caught.value)
    assert "HTTP 504: Timeout: Too large resource version: 1042, current: 1017" in message
    assert "ResourceVersionTooLarge" in message and f"after {ATTEMPTS} tries" in message


@pytest.mark.parametrize(
    ("status", "reason", "message"),
    [
        (500, "InternalError", "Internal error occurred: etcdserver: leader changed"),
        # the API server's own request timeout: reason Timeout, but no ResourceVersionTooLarge
        (504, "Timeout", "Timeout: request did not complete within the allotted timeout"),
    ],
)
def test_any_other_server_error_is_not_asked_again(
    script: tuple[Script, KubeClient], status: int, reason: str, message: str
) -> None:
    answers, client = script
    body = {**TOO_LARGE, "message": message, "reason": reason, "code": status, "details": {}}
    answers.answers = [(status, "application/json", orjson.dumps(body)), json_list("a")]
    with pytest.raises(TemporaryError, match=f"HTTP {status}: {message}") as caught:
        client.list("/api/v1/namespaces")
    assert not isinstance(caught.value, CacheBehindError)
    assert len(answers.queries) == 1


# --- the real API server ---------------------------------------------------------------------


def collection_version(client: KubeClient, path: str) -> str:
    """The resourceVersion of a collection now (a consistent list of one item)."""
    version = client.get(f"{path}?limit=1")["metadata"]["resourceVersion"]
    assert isinstance(version, str) and version
    return version


def ahead_of_etcd(client: KubeClient, revisions: int) -> dict[str, str]:
    """List parameters at a version `revisions` ahead of etcd's now, which only the watch cache
    serves, once it has seen that many more writes."""
    now = int(collection_version(client, "/api/v1/namespaces"))
    return {"resourceVersion": str(now + revisions), "resourceVersionMatch": "NotOlderThan"}


@pytest.mark.integration
def test_a_real_api_server_still_behind_after_the_tries_is_a_temporary_error(
    client: KubeClient,
) -> None:
    params = ahead_of_etcd(client, 1_000_000)
    before = client.requests_made
    with pytest.raises(TemporaryError) as caught:
        # protobuf asked for: the server's Status comes as protobuf
        client.list_protobuf(
            "/api/v1/nodes", NodeList, node_from_proto, node_from_api, params=params
        )
    assert client.requests_made - before == ATTEMPTS
    message = str(caught.value)
    assert "GET /api/v1/nodes: HTTP 504: Timeout: Too large resource version: " in message
    assert "ResourceVersionTooLarge" in message and f"after {ATTEMPTS} tries" in message


@pytest.mark.integration
def test_a_real_list_is_answered_once_the_watch_cache_reaches_its_version(
    client: KubeClient, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The first try finds the cache behind; writes made then bring etcd, and the cache, to
    the version, and a later try of the same list is answered."""
    caplog.set_level("WARNING", logger=LOGGER_NAME)
    retried = threading.Event()
    done = threading.Event()

    class OnRetry(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            if record.msg == "observe.list-retried":
                retried.set()

    def write_until_done() -> None:
        if not retried.wait(timeout=60):
            return
        for index in range(400):
            if done.is_set():
                return
            client.create(
                object_path("v1", "configmaps", namespace, None),
                {"metadata": {"name": f"bump-{index}"}},
            )

    logger = logging.getLogger(LOGGER_NAME)
    handler = OnRetry()
    logger.addHandler(handler)
    writer = threading.Thread(target=write_until_done, daemon=True)
    writer.start()
    try:
        params = ahead_of_etcd(client, 40)
        names = client.list_objects(
            f"/api/v1/namespaces/{namespace}/configmaps",
            lambda raw: str(raw["metadata"]["name"]),
            params=params,
        )
    finally:
        done.set()
        retried.set()
        logger.removeHandler(handler)
        writer.join(timeout=30)
    assert any(name.startswith("bump-") for name in names)


@pytest.mark.integration
def test_a_list_at_a_version_follows_its_pages(client: KubeClient) -> None:
    """A list asked at a version (`NotOlderThan`) over several pages: the next pages go by the
    continue token alone, which carries the version (the API server refuses a continue with
    `resourceVersionMatch`: 422, which stopped the bench's count of 10,000 nodes)."""
    version = collection_version(client, "/api/v1/nodes")
    params = {"resourceVersion": version, "resourceVersionMatch": "NotOlderThan"}
    pages = list(client.list_pages("/api/v1/nodes", limit=2, params=params))
    assert len(pages) >= 2
    everything = client.list("/api/v1/nodes")
    assert sum(len(page) for page in pages) == len(everything)
    listed = client.list_objects(
        "/api/v1/nodes", lambda raw: str(raw["metadata"]["name"]), limit=2, params=params
    )
    assert sorted(listed) == sorted(n["metadata"]["name"] for n in everything)
