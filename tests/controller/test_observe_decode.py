"""Unit tests of the field-limited list decoding (simdjson lazy objects, `KubeClient.list_objects`)
against the full decoding (orjson dicts): the same views, and clear errors for malformed objects
that stop a pass before it acts. The API server here is a small fake on loopback that pages lists
the way kube-apiserver does (limit/continue), so paging, prefetching and the 410 restart run over
real HTTP."""

from __future__ import annotations

import copy
import io
import json
import re
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import simdjson

from controller.config import Settings
from controller.errors import PermanentError
from controller.log import Log
from controller.observe.kube import KubeClient
from controller.observe.model import (
    DecodeError,
    accelerator_pod_from_api,
    namespace_from_api,
    node_from_api,
    pdb_from_api,
    pod_from_api,
)
from controller.observe.snapshot import Snapshot, _volcano, take_snapshot
from controller.reconcile import run_pass
from tests.controller.builders import GPU_TOLERATIONS, NOW, a_node, a_pod, fleet
from tests.controller.fake_api import Query, serving


def lazy(raw: Any) -> Any:
    """The object as `list_objects` hands it to a converter: a lazy simdjson object."""
    return simdjson.Parser().parse(orjson.dumps(raw))


def pods() -> list[dict[str, Any]]:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["a"]}]}
                ]
            }
        }
    }
    waiting = a_pod("waiting").type("training").gpus(8).priority(5000).pending(NOW - 900)
    waiting_raw = waiting.tolerate(GPU_TOLERATIONS).select(pool="a").raw()
    waiting_raw["spec"]["affinity"] = affinity
    with_init = a_pod("init").gpus(1).on("n1").raw()
    with_init["spec"]["initContainers"] = [
        {"name": "fetch", "resources": {"limits": {"nvidia.com/gpu": "2"}}},
        {
            "name": "side",
            "restartPolicy": "Always",
            "resources": {"limits": {"nvidia.com/gpu": "1"}},
        },
    ]
    return [
        a_pod("running").type("notebook").gpus(1).on("n1").checkpoint(NOW - 60).raw(),
        a_pod("owned").gpus(2).on("n1").of_deployment("web").raw(),
        a_pod("done").gpus(1).on("n1").finished(NOW - 30).raw(),
        a_pod("going").gpus(1).on("n1").deleting().raw(),
        a_pod("warned").gpus(1).on("n2").warned(NOW - 400, NOW - 100).priority(7).raw(),
        a_pod("tpu").tpus(4).on("t1").raw(),
        waiting_raw,
        with_init,
        a_pod("cpu-only").on("n1").raw(),
        {"metadata": {"name": "bare"}},
    ]


@pytest.mark.parametrize("index", range(len(pods())))
def test_lazy_decoding_gives_the_same_pod_as_full_decoding(index: int) -> None:
    raw = pods()[index]
    assert pod_from_api(lazy(raw)) == pod_from_api(copy.deepcopy(raw))
    assert accelerator_pod_from_api(lazy(raw)) == accelerator_pod_from_api(copy.deepcopy(raw))


def test_lazy_views_are_plain_python_that_outlives_the_page() -> None:
    raw = pods()[6]
    pod = pod_from_api(lazy(raw))
    assert type(pod.labels) is dict and type(pod.annotations) is dict
    assert all(type(t) is dict for t in pod.tolerations + pod.required_affinity)
    assert all(type(c) is dict and type(c["resources"]) is dict for c in pod.containers)
    assert pod.manifest() == pod_from_api(raw).manifest()
    assert orjson.dumps(pod.manifest())  # what OPA receives serialises


def test_other_views_decode_the_same_both_ways() -> None:
    node = a_node("n1").gpus(8).spot().label("pool", "a").not_ready()._raw
    assert node_from_api(lazy(node)) == node_from_api(copy.deepcopy(node))
    namespace = {
        "metadata": {
            "name": "ml-research",
            "uid": "u",
            "resourceVersion": "3",
            "labels": {"team": "research"},
            "annotations": {"fleetplane.dev/spend": "{}"},
        }
    }
    assert namespace_from_api(lazy(namespace)) == namespace_from_api(namespace)
    pdb = {
        "metadata": {"name": "keep", "namespace": "ml-research"},
        "spec": {"selector": {"matchLabels": {"app": "keep"}}},
        "status": {"disruptionsAllowed": 1},
    }
    assert pdb_from_api(lazy(pdb)) == pdb_from_api(pdb)


def malformed(path: list[str | int], value: Any) -> dict[str, Any]:
    raw = a_pod("bad").in_ns("ml-research").gpus(1).on("n1").raw()
    target: Any = raw
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return raw


MALFORMED = [
    (["metadata", "labels"], ["a", "b"], "metadata.labels: expected an object, got array"),
    (["metadata", "labels"], {"a": 1}, "metadata.labels['a']: expected a string, got int"),
    (["metadata", "annotations"], "x", "metadata.annotations: expected an object, got str"),
    (["metadata", "name"], 7, "metadata.name: expected a string, got int"),
    (["spec", "containers"], {"name": "main"}, "spec.containers: expected an array, got object"),
    (["spec", "containers"], ["main"], "spec.containers[0]: expected an object, got str"),
    (["spec", "containers", 0, "resources"], [], "resources: expected an object, got array"),
    (["spec", "priority"], "high", "spec.priority: expected an integer, got str"),
    (["spec", "tolerations"], "all", "spec.tolerations: expected an array, got str"),
    (["spec", "nodeName"], {"n": 1}, "spec.nodeName: expected a string, got object"),
    (["status"], [], "status: expected an object, got array"),
    (["status", "conditions"], [1], "status.conditions[0]: expected an object, got int"),
    (["status", "startTime"], "yesterday", "malformed"),
]


@pytest.mark.parametrize(("path", "value", "message"), MALFORMED, ids=[m[2] for m in MALFORMED])
@pytest.mark.parametrize("decode", [lazy, copy.deepcopy], ids=["lazy", "full"])
def test_a_malformed_pod_is_a_clear_decode_error(
    path: list[str | int], value: Any, message: str, decode: Any
) -> None:
    raw = malformed(path, value)
    with pytest.raises(DecodeError) as error:
        pod_from_api(decode(raw))
    assert str(error.value).startswith("pod ml-research/")
    assert message in str(error.value)
    assert isinstance(error.value, PermanentError)


def test_an_item_that_is_no_object_is_a_decode_error() -> None:
    for decode in (lazy, copy.deepcopy):
        with pytest.raises(DecodeError, match=re.escape("pod: expected an object, got array")):
            accelerator_pod_from_api(decode([1, 2]))
        with pytest.raises(DecodeError, match=re.escape("node n1: metadata.labels")):
            node_from_api(decode({"metadata": {"name": "n1", "labels": [1]}}))


# --- list_objects over HTTP ---------------------------------------------------------------------


class FakeApi:
    """Lists by path, paged by `limit` with opaque continue tokens; `expire` makes the next
    continue request answer 410 Gone (as kube-apiserver does when a token is too old)."""

    def __init__(self, lists: dict[str, list[Any]]) -> None:
        self.lists = lists
        self.expire = 0
        self.requests: list[str] = []

    def answer(self, path: str, query: dict[str, list[str]]) -> tuple[int, bytes]:
        self.requests.append(path + ("?continue" if "continue" in query else ""))
        if path not in self.lists:
            return 404, json.dumps({"kind": "Status", "message": "not found"}).encode()
        if "continue" in query and self.expire:
            self.expire -= 1
            return 410, json.dumps({"kind": "Status", "message": "too old"}).encode()
        items = self.lists[path]
        start = int(query["continue"][0]) if "continue" in query else 0
        limit = int(query.get("limit", ["500"])[0])
        page = items[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": "1"}
        if start + limit < len(items):
            metadata["continue"] = str(start + limit)
        return 200, json.dumps({"kind": "List", "metadata": metadata, "items": page}).encode()


@pytest.fixture
def fake_api() -> Iterator[tuple[FakeApi, KubeClient]]:
    api = FakeApi({})

    def respond(path: str, query: Query, _accept: str) -> tuple[int, str, bytes]:
        status, body = api.answer(path, query)
        return status, "application/json", body

    with serving(respond) as client:
        yield api, client


def gpu_pods(count: int) -> list[dict[str, Any]]:
    return [a_pod(f"p{i}").gpus(1).on("n1").raw() for i in range(count)] + [
        a_pod("cpu").on("n1").raw()
    ]


def test_list_objects_pages_converts_and_drops(fake_api: tuple[FakeApi, KubeClient]) -> None:
    api, client = fake_api
    api.lists["/api/v1/pods"] = gpu_pods(7)
    got = client.list_objects("/api/v1/pods", accelerator_pod_from_api, limit=3)
    assert [p.name for p in got] == [f"p{i}" for i in range(7)]
    assert got == [pod_from_api(raw) for raw in api.lists["/api/v1/pods"][:7]]
    assert api.requests == ["/api/v1/pods"] + ["/api/v1/pods?continue"] * 2


def test_an_expired_continue_token_restarts_the_list_once_without_duplicates(
    fake_api: tuple[FakeApi, KubeClient],
) -> None:
    api, client = fake_api
    api.lists["/api/v1/pods"] = gpu_pods(7)
    api.expire = 1
    got = client.list_objects("/api/v1/pods", accelerator_pod_from_api, limit=3)
    assert [p.name for p in got] == [f"p{i}" for i in range(7)]
    api.expire = 2
    with pytest.raises(PermanentError, match="HTTP 410"):
        client.list_objects("/api/v1/pods", accelerator_pod_from_api, limit=3)


def test_a_malformed_item_fails_the_list(fake_api: tuple[FakeApi, KubeClient]) -> None:
    api, client = fake_api
    api.lists["/api/v1/pods"] = [*gpu_pods(4), malformed(["metadata", "labels"], [1])]
    with pytest.raises(DecodeError, match=re.escape("pod ml-research/bad: metadata.labels")):
        client.list_objects("/api/v1/pods", accelerator_pod_from_api, limit=2)


def test_a_malformed_pod_stops_the_pass_before_any_action(
    fake_api: tuple[FakeApi, KubeClient],
) -> None:
    api, client = fake_api
    team_pods = gpu_pods(3)
    api.lists.update(
        {
            "/api/v1/namespaces": [{"metadata": {"name": "ml-research", "uid": "u"}}],
            "/api/v1/nodes": [a_node("n1").gpus(8)._raw],
            "/apis/policy/v1/poddisruptionbudgets": [],
            "/apis/scheduling.k8s.io/v1/priorityclasses": [],
            "/api/v1/namespaces/ml-research/pods": [
                *team_pods,
                malformed(["spec", "containers"], "main"),
            ],
        }
    )
    with pytest.raises(DecodeError, match=re.escape("spec.containers: expected an array")):
        take_snapshot(client, log=Log())
    before = len(api.requests)
    settings = Settings(
        prometheus_url="http://127.0.0.1:9", opa_url="http://127.0.0.1:9", dry_run=True
    )
    out = io.StringIO()
    summary = run_pass(kube=client, fleet=fleet(), settings=settings, out=out, log=Log())
    assert summary.get("errors", concern="observe", kind="permanent") == 1
    assert not any(name == "actions" for name, _ in summary.values)
    assert out.getvalue() == ""
    # Only lists were made: nothing written.
    assert all(not r.endswith("/eviction") for r in api.requests[before:])


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({"minMember": 4, "queue": "research"}, {("ml", "pg"): 4}),
        ({"queue": "research"}, {}),  # absent: unknown, so a pending gang of it waits
        ({"minMember": "4"}, {}),  # not a whole number: unknown as well
        ({"minMember": True}, {}),
    ],
)
def test_a_podgroups_min_member_is_kept_only_when_it_is_a_whole_number(
    spec: dict[str, Any], want: dict[tuple[str, str], int]
) -> None:
    raw = {"metadata": {"namespace": "ml", "name": "pg"}, "spec": spec, "status": {}}
    group = _volcano("PodGroup", simdjson.Parser().parse(json.dumps(raw).encode()))
    snapshot = Snapshot(
        taken_at=NOW,
        nodes={},
        pods=[],
        namespaces={},
        pdbs=[],
        priority_classes={},
        volcano=[group, _volcano("Job", simdjson.Parser().parse(json.dumps(raw).encode()))],
    )
    assert snapshot.min_members() == want
