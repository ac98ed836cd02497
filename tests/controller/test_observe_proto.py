"""Listing pods and nodes as Kubernetes protobuf (`KubeClient.list_protobuf`, `observe.proto`).

Against the real kube-apiserver: a varied set of pods and nodes listed both ways, at one
resourceVersion, gives equal views object by object, and the protobuf list pages. Against a
small fake server: a JSON answer to the protobuf Accept is decoded as JSON, an expired continue
token restarts the list, and an answer that is neither is a PermanentError naming the path. And
the generated modules are what tools/k8sproto.py generates from the pinned sources."""

from __future__ import annotations

import contextlib
import copy
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from controller.errors import NotFoundError, PermanentError
from controller.observe.k8s_pb import core_v1_pb2, meta_v1_pb2
from controller.observe.kube import PROTOBUF, KubeClient, object_path, pod_path
from controller.observe.model import (
    DecodeError,
    accelerator_pod_from_api,
    node_from_api,
    parse_time,
    pod_from_api,
)
from controller.observe.proto import (
    NodeList,
    PodList,
    accelerator_pod_from_proto,
    node_from_proto,
    pod_from_proto,
)
from localfleet.controlplane import LocalCluster
from tests.controller.builders import a_pod
from tests.controller.fake_api import Query, protobuf_body, serving
from tools import k8sproto

MIG = "nvidia.com/mig-1g.10gb"
HOLD = "fleetplane.dev/test-hold"


def not_json(raw: Any) -> Any:
    raise AssertionError("the API server answered JSON to a protobuf list")


def wait_for(predicate: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.2)
    raise AssertionError(f"condition not met within {timeout}s")


# --- against the real API server ----------------------------------------------------------------


def container(name: str, limits: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name, "image": "registry.example/train:1", **extra}
    if limits:
        found["resources"] = {"limits": limits}
    return found


def pod(name: str, spec: dict[str, Any], **metadata: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}, **metadata},
        "spec": {"terminationGracePeriodSeconds": 5, **spec},
    }


AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "pool", "operator": "In", "values": ["a", "b"]},
                        {"key": "spot", "operator": "DoesNotExist"},
                    ]
                },
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["x"]}]},
                {
                    "matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["3"]}],
                    "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["y"]}],
                },
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {"weight": 5, "preference": {"matchExpressions": [{"key": "z", "operator": "Exists"}]}}
        ],
    },
    # Placement by other pods, which preemption does not model (decide.preempt.plan).
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {"matchLabels": {"app": "other"}},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    },
}
TOLERATIONS = [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unreachable", "effect": "NoExecute", "tolerationSeconds": 0},
    {
        "key": "pool",
        "operator": "Equal",
        "value": "a",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    },
    {"operator": "Exists"},
]


def varied_pods(node: str, owner: dict[str, Any], priority_class: str) -> list[dict[str, Any]]:
    gpu = {"nvidia.com/gpu": "1"}
    return [
        pod(
            "init",
            {
                "nodeName": node,
                "initContainers": [
                    container("fetch", {"nvidia.com/gpu": "3"}),
                    container("side", gpu, restartPolicy="Always"),
                    container("warm", {"nvidia.com/gpu": "2"}),
                ],
                "containers": [container("main", gpu), container("log")],
            },
        ),
        pod("mig", {"containers": [container("main", {MIG: "2", "cpu": "500m"})]}),
        pod(
            "tpu",
            {
                "nodeName": node,
                "containers": [container("main", {"google.com/tpu": "4", "memory": "1Gi"})],
                "tolerations": [{"key": "google.com/tpu", "operator": "Exists"}],
            },
        ),
        pod(
            "affine",
            {
                "containers": [container("main", {"nvidia.com/gpu": "8"})],
                "affinity": AFFINITY,
                "tolerations": TOLERATIONS,
                "nodeSelector": {"pool": "a", "fleetplane.dev/capacity-type": "spot"},
                "priorityClassName": priority_class,
            },
            annotations={"fleetplane.dev/checkpoint": "2024-01-01T00:00:00Z"},
        ),
        pod(
            "owned",
            {"nodeName": node, "containers": [container("main", {"nvidia.com/gpu": "2"})]},
            ownerReferences=[
                {**owner, "controller": False, "name": "other", "uid": str(uuid.uuid4())},
                {**owner, "controller": True, "blockOwnerDeletion": True},
            ],
        ),
        pod("done", {"nodeName": node, "containers": [container("a", gpu), container("b", gpu)]}),
        pod(
            "going",
            {"containers": [container("main", gpu)], "nodeSelector": {"pool": "nowhere"}},
            finalizers=[HOLD],
        ),
        pod(
            "claims",
            {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.example/train:1",
                        "resources": {
                            "limits": gpu,
                            "requests": {"cpu": "1", **gpu},
                            "claims": [{"name": "dev"}, {"name": "dev2", "request": "r"}],
                        },
                    }
                ],
                "resourceClaims": [
                    {"name": "dev", "resourceClaimName": "missing"},
                    {"name": "dev2", "resourceClaimName": "missing2"},
                ],
            },
        ),
        pod(
            "cpu-running",
            {
                "containers": [container("main", {"cpu": "100m"})],
                "nodeSelector": {"type": "kwok"},
                "tolerations": [TOLERATIONS[0], {"key": "google.com/tpu", "operator": "Exists"}],
            },
        ),
        pod(
            "cpu-requests",
            {
                "nodeName": node,
                "containers": [
                    {"name": "main", "image": "x", "resources": {"requests": {"cpu": "250m"}}}
                ],
            },
        ),
        pod("cpu-bare", {"containers": [{"name": "main", "image": "x"}]}, labels={}),
    ]


def node_objects(suffix: str) -> list[dict[str, Any]]:
    def node(name: str, ready: str, **spec: Any) -> dict[str, Any]:
        gpus = "8" if ready == "True" else "0"
        return {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"{name}-{suffix}", "labels": {"pool": "a", "test": suffix}},
            "spec": {"unschedulable": True, **spec},
            "status": {
                "capacity": {"nvidia.com/gpu": gpus, "cpu": "64", MIG: "7"},
                "allocatable": {"nvidia.com/gpu": gpus, "cpu": "63500m", MIG: "7"},
                "conditions": [
                    {"type": "MemoryPressure", "status": "False", "reason": "Fine"},
                    {"type": "Ready", "status": ready, "reason": "Test"},
                ],
            },
        }

    return [
        node(
            "ready",
            "True",
            taints=[
                {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
                {"key": "fleetplane.dev/test", "effect": "PreferNoSchedule"},
            ],
        ),
        # The NoExecute taint on the node no pod is bound to: the taint eviction controller would
        # delete them.
        node(
            "notready",
            "False",
            taints=[
                {"key": "x", "value": "", "effect": "NoSchedule"},
                {"key": "gone", "effect": "NoExecute", "timeAdded": "2024-05-06T07:08:09Z"},
            ],
        ),
    ]


@pytest.fixture
def varied(kube: LocalCluster, namespace: str, client: KubeClient) -> Iterator[str]:
    """The varied pods in the test's namespace, and two nodes (cordoned, no kubelet) they may
    be bound to; the nodes, the PriorityClass and the finalizer go afterwards."""
    suffix = namespace
    nodes = node_objects(suffix)
    priority_class = f"{namespace}-high"
    created: list[str] = []
    try:
        for node in nodes:
            client.create("/api/v1/nodes", node)
            created.append(object_path("v1", "nodes", None, node["metadata"]["name"]))
        client.create(
            object_path("scheduling.k8s.io/v1", "priorityclasses", None, None),
            {"metadata": {"name": priority_class}, "value": 4321},
        )
        created.append(object_path("scheduling.k8s.io/v1", "priorityclasses", None, priority_class))
        config_map = client.create(
            object_path("v1", "configmaps", namespace, None), {"metadata": {"name": "owner"}}
        )
        owner = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "name": "owner",
            "uid": config_map["metadata"]["uid"],
        }
        for body in varied_pods(nodes[0]["metadata"]["name"], owner, priority_class):
            client.create(pod_path(namespace), body)
        # A finished pod, as a kubelet would report it (this node has none).
        client.merge_patch(
            pod_path(namespace, "done") + "/status",
            {
                "status": {
                    "phase": "Failed",
                    "startTime": "2024-05-06T07:00:00Z",
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "True",
                            "lastTransitionTime": "2024-05-06T06:59:00Z",
                        }
                    ],
                    "containerStatuses": [
                        {
                            "name": name,
                            "image": "registry.example/train:1",
                            "imageID": "",
                            "ready": False,
                            "restartCount": 1,
                            "state": {
                                "terminated": {
                                    "exitCode": 1,
                                    "startedAt": "2024-05-06T07:00:01Z",
                                    "finishedAt": f"2024-05-06T07:0{minute}:00Z",
                                }
                            },
                        }
                        for name, minute in (("a", 5), ("b", 3))
                    ],
                }
            },
        )
        # Bound, scheduled, no startTime: `started` is when it was scheduled.
        client.merge_patch(
            pod_path(namespace, "owned") + "/status",
            {
                "status": {
                    "phase": "Running",
                    "conditions": [
                        {
                            "type": "PodScheduled",
                            "status": "True",
                            "lastTransitionTime": "2024-05-06T06:00:00Z",
                        }
                    ],
                }
            },
        )
        client.delete(pod_path(namespace, "going"))

        def settled() -> bool:
            pods = {p["metadata"]["name"]: p for p in client.list(pod_path(namespace))}
            unschedulable = all(
                any(
                    c.get("reason") == "Unschedulable"
                    for c in pods[name]["status"].get("conditions") or ()
                )
                for name in ("mig", "affine")
            )
            running = pods["cpu-running"]["status"].get("phase") == "Running"
            return unschedulable and running

        wait_for(settled)
        yield namespace
    finally:
        with contextlib.suppress(NotFoundError):
            client.merge_patch(pod_path(namespace, "going"), {"metadata": {"finalizers": None}})
        for path in created:
            client.delete(path)


def both_ways(client: KubeClient, path: str, json_view: Any, proto_view: Any) -> tuple[Any, Any]:
    """The views of one list, from JSON and from protobuf, at the same resourceVersion."""
    version = client.request("GET", path, params={"limit": 1})["metadata"]["resourceVersion"]
    params = {"resourceVersion": version, "resourceVersionMatch": "Exact"}
    return (
        client.list_objects(path, json_view, params=params),
        client.list_protobuf(
            path, NodeList if "nodes" in path else PodList, proto_view, not_json, params=params
        ),
    )


@pytest.mark.integration
def test_pods_and_nodes_decode_the_same_from_protobuf_as_from_json(
    varied: str, client: KubeClient
) -> None:
    from_json, from_proto = both_ways(client, pod_path(varied), pod_from_api, pod_from_proto)
    assert [p.name for p in from_json] == [p.name for p in from_proto]
    assert len(from_json) == 11
    for json_pod, proto_pod in zip(from_json, from_proto, strict=True):
        assert proto_pod == json_pod, json_pod.name
    views = {p.name: p for p in from_proto}
    # What the pods were made to exercise is there.
    assert views["init"].demand == {"nvidia.com/gpu": 3}
    assert views["mig"].demand == {MIG: 2} and views["mig"].unschedulable_since
    assert views["tpu"].demand == {"google.com/tpu": 4}
    assert len(views["affine"].required_affinity) == 3
    assert views["affine"].required_pod_affinity and not views["mig"].required_pod_affinity
    assert views["affine"].priority == 4321 and views["affine"].priority_class
    assert any(t.get("tolerationSeconds") == 0 for t in views["affine"].tolerations)
    owner = views["owned"].owner
    assert owner is not None and owner.name == "owner" and owner.kind == "ConfigMap"
    assert views["owned"].started == parse_time("2024-05-06T06:00:00Z")
    assert views["done"].finished is not None and views["done"].terminal
    assert views["going"].deleting
    assert views["claims"].containers[0]["resources"]["claims"]
    assert views["cpu-running"].phase == "Running" and views["cpu-running"].started
    assert views["cpu-requests"].demand == {} and views["cpu-bare"].labels == {}

    accelerators_json, accelerators_proto = both_ways(
        client, pod_path(varied), accelerator_pod_from_api, accelerator_pod_from_proto
    )
    assert accelerators_proto == accelerators_json
    assert {p.name for p in accelerators_proto} == {
        "init",
        "mig",
        "tpu",
        "affine",
        "owned",
        "done",
        "going",
        "claims",
    }

    nodes_json, nodes_proto = both_ways(client, "/api/v1/nodes", node_from_api, node_from_proto)
    assert len(nodes_json) >= 2
    for json_node, proto_node in zip(nodes_json, nodes_proto, strict=True):
        assert proto_node == json_node, json_node.name
    mine = {n.name: n for n in nodes_proto if n.labels.get("test") == varied}
    ready, not_ready = mine[f"ready-{varied}"], mine[f"notready-{varied}"]
    # Without a kubelet the node lifecycle controller marks `ready` Unknown after its grace
    # period; kwok's nodes stay Ready.
    assert any(n.ready for n in nodes_proto) and not not_ready.ready and ready.unschedulable
    assert ready.allocatable == {"nvidia.com/gpu": 8, MIG: 7}
    assert {"key": "gone", "effect": "NoExecute", "timeAdded": "2024-05-06T07:08:09Z"} in (
        not_ready.taints
    )


@pytest.mark.integration
def test_the_protobuf_list_pages_through_continue_tokens(varied: str, client: KubeClient) -> None:
    whole = client.list_protobuf(pod_path(varied), PodList, pod_from_proto, not_json)
    before = client.requests_made
    paged = client.list_protobuf(pod_path(varied), PodList, pod_from_proto, not_json, limit=2)
    assert client.requests_made - before == 6  # 11 pods, 2 a page
    assert [p.uid for p in paged] == [p.uid for p in whole]


@pytest.mark.integration
def test_a_protobuf_error_answer_is_read(kube: LocalCluster, client: KubeClient) -> None:
    with pytest.raises(PermanentError, match=r"HTTP 400: .*continue key"):
        client.list_protobuf(
            "/api/v1/pods", PodList, pod_from_proto, not_json, params={"continue": "garbage"}
        )


# --- against a fake server ----------------------------------------------------------------------


def pod_message(name: str, gpus: str = "1") -> Any:
    message = core_v1_pb2.Pod()
    message.metadata.name = name
    message.metadata.namespace = "ml-research"
    message.metadata.creationTimestamp.seconds = 1_700_000_000
    main = message.spec.containers.add()
    main.name = "main"
    main.resources.limits["nvidia.com/gpu"].string = gpus
    return message


class FakeApi:
    """Answers each GET from `answer(query)`: (status, Content-Type, body)."""

    def __init__(self) -> None:
        self.answer: Callable[[dict[str, list[str]]], tuple[int, str, bytes]] = lambda q: (
            404,
            "text/plain",
            b"",
        )
        self.accepts: list[str] = []


@pytest.fixture
def fake() -> Iterator[tuple[FakeApi, KubeClient]]:
    api = FakeApi()

    def respond(_path: str, query: Query, accept: str) -> tuple[int, str, bytes]:
        api.accepts.append(accept)
        return api.answer(query)

    with serving(respond) as client:
        yield api, client


def paged(pages: list[Any], *, expire: list[int] | None = None) -> Any:
    """Answers pages of a list (protobuf messages or JSON dicts), the continue token being the
    index of the next page; `expire` holds how many continue requests answer 410 first."""

    def answer(query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        index = int(query["continue"][0]) if "continue" in query else 0
        if index and expire and expire[0]:
            expire[0] -= 1
            status = meta_v1_pb2.Status(message="the continue token is too old", code=410)
            return 410, PROTOBUF, protobuf_body(status, "Status")
        page = copy.deepcopy(pages[index])
        token = str(index + 1) if index + 1 < len(pages) else ""
        if isinstance(page, dict):
            page["metadata"] = {"continue": token} if token else {}
            return 200, "application/json", orjson.dumps(page)
        setattr(page.metadata, "continue", token)
        return 200, f"{PROTOBUF}; charset=utf-8", protobuf_body(page, "PodList")

    return answer


def pod_list(*pods: Any) -> Any:
    found = core_v1_pb2.PodList()
    found.items.extend(pods)
    return found


def test_protobuf_pages_are_followed_and_an_expired_token_restarts_once(
    fake: tuple[FakeApi, KubeClient],
) -> None:
    api, client = fake
    pages = [pod_list(pod_message("a"), pod_message("cpu", "0")), pod_list(pod_message("b"))]
    expire = [1]
    api.answer = paged(pages, expire=expire)
    got = client.list_protobuf("/api/v1/pods", PodList, accelerator_pod_from_proto, not_json)
    assert [p.name for p in got] == ["a", "b"] and expire == [0]
    assert api.accepts[0] == "application/vnd.kubernetes.protobuf, application/json"
    expire[0] = 2
    with pytest.raises(PermanentError, match="HTTP 410: the continue token is too old"):
        client.list_protobuf("/api/v1/pods", PodList, accelerator_pod_from_proto, not_json)


def test_a_json_answer_to_a_protobuf_list_is_decoded_as_json(
    fake: tuple[FakeApi, KubeClient],
) -> None:
    api, client = fake
    raw = [a_pod(f"p{i}").gpus(1).on("n1").raw() for i in range(3)] + [a_pod("c").raw()]
    api.answer = paged([{"items": raw[:2]}, {"items": raw[2:]}])
    got = client.list_protobuf("/api/v1/pods", PodList, not_json, accelerator_pod_from_api)
    assert got == [pod_from_api(r) for r in raw[:3]]


@pytest.mark.parametrize(
    ("content_type", "body", "message"),
    [
        ("text/html", b"<html>proxy error</html>", "expected protobuf or JSON, got text/html"),
        ("", b"garbage", "expected protobuf or JSON, got no Content-Type"),
        (PROTOBUF, b"garbage", "not a Kubernetes protobuf answer"),
        (PROTOBUF, b"k8s\x00\xff\xff\xff", "malformed protobuf"),
        (PROTOBUF, protobuf_body(core_v1_pb2.NodeList(), "NodeList"), "expected a PodList"),
        ("application/json", b"{not json", "not JSON"),
    ],
)
def test_an_answer_that_is_no_list_is_a_permanent_error_naming_the_path(
    fake: tuple[FakeApi, KubeClient], content_type: str, body: bytes, message: str
) -> None:
    api, client = fake
    api.answer = lambda query: (200, content_type, body)
    with pytest.raises(PermanentError, match="GET /api/v1/namespaces/a/pods: ") as error:
        client.list_protobuf("/api/v1/namespaces/a/pods", PodList, pod_from_proto, pod_from_api)
    assert message in str(error.value)


def test_quantities_and_times_read_as_the_json_path_reads_them() -> None:
    message = pod_message("odd", "500m")
    sidecar = message.spec.initContainers.add()
    sidecar.name, sidecar.restartPolicy = "side", "Always"
    sidecar.resources.requests["google.com/tpu"].string = "2"
    assert pod_from_proto(message).demand == {"google.com/tpu": 2}  # 500m GPUs count 0
    assert pod_from_proto(message).created == 1_700_000_000.0
    node = core_v1_pb2.Node()
    node.metadata.name = "n1"
    taint = node.spec.taints.add()
    taint.key, taint.effect = "k", "NoExecute"
    taint.timeAdded.seconds = 10**13  # beyond year 9999
    with pytest.raises(DecodeError, match="node n1: malformed"):
        node_from_proto(node)


# --- the generated modules ----------------------------------------------------------------------


def test_the_generated_modules_are_what_tools_k8sproto_generates(tmp_path: Path) -> None:
    # No download here: `make tools` builds kube from the pinned module, so its sources are in
    # the module cache; if they are not, this fails with k8sproto's message.
    written = k8sproto.generate(tmp_path, download=False)
    assert {p.name for p in written} == {f"{m}.py" for m in k8sproto.PROTOS.values()}
    for path in written:
        committed = k8sproto.PACKAGE_DIR / path.name
        assert path.read_bytes() == committed.read_bytes(), f"{committed} is stale"


def test_repeated_containers_and_tolerations_are_decoded_once_and_told_apart() -> None:
    # `_slim_container`, `_toleration` and `pod_demand` remember what they copied out by its
    # protobuf encoding: pods that repeat one share it, and any difference is a different one.
    def with_toleration(message: Any, key: str, seconds: int | None = None) -> Any:
        toleration = message.spec.tolerations.add()
        toleration.key, toleration.operator, toleration.effect = key, "Exists", "NoExecute"
        if seconds is not None:
            toleration.tolerationSeconds = seconds
        return message

    one = [with_toleration(pod_message(f"one-{i}"), "nvidia.com/gpu") for i in range(2)]
    two = with_toleration(pod_message("two", gpus="2"), "nvidia.com/gpu", seconds=300)
    other_image = pod_message("image")
    other_image.spec.containers[0].image = "trainer:2"
    requested = pod_message("requested")
    requested.spec.containers[0].resources.requests["nvidia.com/gpu"].string = "1"
    views = [accelerator_pod_from_proto(m) for m in [*one, two, other_image, requested]]
    a, b, c, d, e = (v for v in views if v is not None)
    assert a == b.__class__(**{**_fields(b), "name": "one-0"})
    assert a.containers[0] is b.containers[0] and a.tolerations[0] is b.tolerations[0]
    assert (a.demand, c.demand) == ({"nvidia.com/gpu": 1}, {"nvidia.com/gpu": 2})
    assert c.tolerations == (
        {
            "key": "nvidia.com/gpu",
            "operator": "Exists",
            "effect": "NoExecute",
            "tolerationSeconds": 300,
        },
    )
    assert a.tolerations == (
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"},
    )
    assert c.containers[0]["resources"] == {"limits": {"nvidia.com/gpu": "2"}}
    assert d.containers[0]["image"] == "trainer:2" and "image" not in a.containers[0]
    assert e.containers[0]["resources"] == {
        "limits": {"nvidia.com/gpu": "1"},
        "requests": {"nvidia.com/gpu": "1"},
    }
    assert e.demand == a.demand == {"nvidia.com/gpu": 1}


def _fields(pod: Any) -> dict[str, Any]:
    return {f: getattr(pod, f) for f in pod.__dataclass_fields__}
