"""ControllerJob: the CronJobs, the admission keeper and least-privilege RBAC."""

from __future__ import annotations

import argparse
import json
from types import SimpleNamespace

import pytest

from components.controller_job import ControllerJob, ControllerJobArgs
from controller.act.idle import _scale_to_zero
from controller.admission_keeper import LEASE_SUFFIX
from controller.cli import add_parser
from controller.config import parse_config
from controller.decide.idle import PodJudgement, ReclaimPlan, Verdict
from controller.decide.workloads import Target
from controller.observe.kube import namespace_path, object_path, pod_path
from controller.upgrade.settings import upgrade_settings
from fleet.config import FleetConfig
from fleet.render import render_opa_data
from tests.components.component_testkit import Declare
from tests.controller.builders import a_pod


def grants(rules: list[dict], group: str, resource: str) -> set[str]:
    return {
        verb
        for rule in rules
        if group in rule["apiGroups"] and resource in rule["resources"]
        for verb in rule["verbs"]
    }


_VERBS = {"POST": "create", "PATCH": "patch", "PUT": "update", "DELETE": "delete"}


def _attributes(method: str, path: str) -> tuple[str, str, str | None, str, str | None]:
    """(verb, group, namespace, resource[/subresource], name) of a request, as the
    kube-apiserver's RBAC authorizer sees them."""
    parts = path.strip("/").split("/")
    if parts[0] == "api":
        group, rest = "", parts[2:]
    else:
        group, rest = parts[1], parts[3:]
    namespace = None
    if len(rest) > 2 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    resource, name = rest[0], rest[1] if len(rest) > 1 else None
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    verb = _VERBS.get(method) or ("get" if name else "list")
    return verb, group, namespace, resource, name


def _allows(rule: dict, verb: str, group: str, resource: str, name: str | None) -> bool:
    names = rule.get("resourceNames")
    return (
        verb in rule["verbs"]
        and group in rule["apiGroups"]
        and resource in rule["resources"]
        and (not names or name in names)
    )


def authorized(declared, method: str, path: str) -> bool:
    """Whether the controller's ServiceAccount may make this request under the declared
    ClusterRole and Role (each bound to it)."""
    verb, group, namespace, resource, name = _attributes(method, path)
    (cluster_role,) = declared.kind("ClusterRole")
    (role,) = declared.kind("Role")
    if any(_allows(r, verb, group, resource, name) for r in cluster_role["rules"]):
        return True
    return namespace == role["metadata"]["namespace"] and any(
        _allows(r, verb, group, resource, name) for r in role["rules"]
    )


class RecordingKube:
    """Answers GETs from `objects` and records every request as (method, path)."""

    def __init__(self, objects: dict[str, dict]) -> None:
        self.objects = objects
        self.requests: list[tuple[str, str]] = []

    def get(self, path: str) -> dict:
        self.requests.append(("GET", path))
        return self.objects[path]

    def merge_patch(self, path: str, patch: dict) -> dict:
        self.requests.append(("PATCH", path))
        return {**self.objects[path], **patch}


@pytest.fixture
def prod_controller(declare: Declare, stack_fleets: dict[str, FleetConfig]):
    fleet = stack_fleets["prod"]
    return fleet, declare(lambda: ControllerJob("prod-controller", ControllerJobArgs(fleet=fleet)))


def test_cluster_role_is_least_privilege(prod_controller) -> None:
    _, declared = prod_controller
    (role,) = declared.kind("ClusterRole")
    rules = role["rules"]
    for rule in rules:
        assert "*" not in rule["verbs"] and "*" not in rule["resources"]
        assert "*" not in rule["apiGroups"]
        assert "secrets" not in rule["resources"]
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"])
    # (group, resource) -> verbs, exactly
    want = {
        ("", "nodes"): {"get", "list", "watch", "patch"},
        # the GpuHealthy condition (health remediation)
        ("", "nodes/status"): {"patch"},
        # no cluster-wide `create`: that is granted in the validator's namespace only
        ("", "pods"): {"get", "list", "watch", "patch", "delete"},
        ("", "pods/eviction"): {"create"},
        ("", "namespaces"): {"get", "list", "watch", "patch"},
        ("policy", "poddisruptionbudgets"): {"get", "list", "watch"},
        ("resource.k8s.io", "resourceclaims"): {"get", "list", "watch"},
        ("resource.k8s.io", "resourceclaimtemplates"): {"get", "list", "watch"},
        ("karpenter.sh", "nodeclaims"): {"get"},
        ("bus.volcano.sh", "commands"): {"create"},
        ("", "events"): {"create", "get", "patch"},
        ("scheduling.k8s.io", "priorityclasses"): {"get", "list", "watch"},
        ("scheduling.volcano.sh", "podgroups"): {"get", "list", "watch"},
        # the team's open burst tier is an annotation of its Queue
        ("scheduling.volcano.sh", "queues"): {"get", "list", "watch", "patch"},
        ("batch.volcano.sh", "jobs"): {"get", "list", "watch", "patch"},
        ("apps", "deployments"): {"get", "list", "watch", "patch"},
        ("apps", "statefulsets"): {"get", "list", "watch", "patch"},
        ("apps", "replicasets"): {"get", "list", "watch", "patch"},
        ("batch", "jobs"): {"get", "list", "watch", "patch"},
        # the operators' workloads: read up the owner chain, suspend or scale the top; the
        # JobSets and RayClusters listed too, so the snapshot's lineage reaches their tops
        ("trainer.kubeflow.org", "trainjobs"): {"get", "patch"},
        ("jobset.x-k8s.io", "jobsets"): {"get", "list", "patch"},
        ("ray.io", "rayjobs"): {"get", "patch"},
        ("ray.io", "rayclusters"): {"get", "list", "patch"},
        ("leaderworkerset.x-k8s.io", "leaderworkersets"): {"get", "patch"},
    }
    got = {
        (group, resource): grants(rules, group, resource)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert got == want


def test_namespaced_role_covers_only_the_lease_validator_pods_and_opa_endpoints(
    prod_controller,
) -> None:
    _, declared = prod_controller
    (role,) = declared.kind("Role")
    assert role["metadata"]["namespace"] == "fleetplane-system"
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": [
                "fleetplane-controller",
                "fleetplane-controller-upgrade",
                "fleetplane-controller-health",
                "fleetplane-controller-admission",
            ],
            "verbs": ["get", "patch"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]},
        # the documents OPA loads at start: this ConfigMap and the sharded documents' parts
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create"]},
        {
            "apiGroups": [""],
            "resources": ["configmaps"],
            "resourceNames": [
                "fleetplane-opa-controller-data",
                *(
                    f"fleetplane-opa-controller-data-{doc}-{i}"
                    for doc in ("reservations", "workloads")
                    for i in range(16)
                ),
                *(f"fleetplane-opa-controller-data-disruption-{i}" for i in range(16)),
            ],
            "verbs": ["get", "patch"],
        },
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["list"]},
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["get", "list"],
        },
    ]
    (binding,) = declared.kind("ClusterRoleBinding")
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": "fleetplane-controller",
            "namespace": "fleetplane-system",
        }
    ]


def test_a_bare_replicaset_can_be_scaled_to_zero(prod_controller) -> None:
    """Idle reclaim of a pod whose ReplicaSet no Deployment owns patches the ReplicaSet:
    every request `_scale_to_zero` makes must pass RBAC, or a real cluster answers 403."""
    _, declared = prod_controller
    rs_path = object_path("apps/v1", "replicasets", "team-a", "notebook-7f9c")
    rs = {
        "kind": "ReplicaSet",
        "metadata": {"name": "notebook-7f9c", "resourceVersion": "12", "uid": "o-notebook-7f9c"},
        "spec": {"replicas": 1},
    }
    kube = RecordingKube({rs_path: rs})
    log = SimpleNamespace(info=lambda *a, **k: None)
    rt = SimpleNamespace(kube=kube, now=1_800_000_000.0, log=log)
    target = Target(
        api_version="apps/v1",
        kind="Deployment",
        namespace="team-a",
        name="notebook",
        method="scale-to-zero",
        via="notebook-7f9c",
    )
    # The one pod judged idle, of this ReplicaSet (the builder names its owner uid o-<name>).
    pod = a_pod("notebook-7f9c-x").gpus(1).on("h100-0").owned_by("ReplicaSet", "notebook-7f9c")
    item = ReclaimPlan(
        target=target,
        pods=(PodJudgement(pod=pod.build(), verdict=Verdict.RECLAIM, reason="idle"),),
    )
    ref = _scale_to_zero(rt, target, item, "idle")  # type: ignore[arg-type]
    assert ref is not None and ref.kind == "ReplicaSet"
    assert ("PATCH", rs_path) in kube.requests
    for method, path in kube.requests:
        assert authorized(declared, method, path), (method, path)


def test_pods_are_created_only_in_the_validator_namespace(prod_controller) -> None:
    """The only pod the controller creates is the driver-upgrade validator, in
    `upgrade.validator_namespace` as the controller resolves it from the rendered document."""
    fleet, declared = prod_controller
    settings = upgrade_settings(parse_config(render_opa_data(fleet)))
    assert authorized(declared, "POST", pod_path(settings.validator_namespace))
    for namespace in ("team-a", "kube-system", "gpu-operator"):
        assert namespace != settings.validator_namespace
        assert not authorized(declared, "POST", pod_path(namespace)), namespace


@pytest.mark.parametrize(
    ("method", "path"),
    [
        # reconcile: observe
        ("GET", "/api/v1/nodes"),
        ("GET", "/api/v1/namespaces"),
        ("GET", "/api/v1/namespaces/team-a/pods"),
        ("GET", "/api/v1/pods"),
        ("GET", "/apis/policy/v1/poddisruptionbudgets"),
        ("GET", "/apis/scheduling.k8s.io/v1/priorityclasses"),
        ("GET", "/apis/scheduling.volcano.sh/v1beta1/podgroups"),
        ("GET", "/apis/scheduling.volcano.sh/v1beta1/queues"),
        ("GET", "/apis/batch.volcano.sh/v1alpha1/jobs"),
        # idle: warn/clear, reclaim (controller/act/idle.py), preemption notes
        ("PATCH", pod_path("team-a", "p")),
        ("GET", pod_path("team-a", "p")),
        ("DELETE", pod_path("team-a", "p")),
        ("GET", object_path("apps/v1", "replicasets", "team-a", "rs")),
        ("PATCH", object_path("apps/v1", "replicasets", "team-a", "rs")),
        ("GET", object_path("apps/v1", "deployments", "team-a", "d")),
        ("PATCH", object_path("apps/v1", "deployments", "team-a", "d")),
        ("GET", object_path("apps/v1", "statefulsets", "team-a", "s")),
        ("PATCH", object_path("apps/v1", "statefulsets", "team-a", "s")),
        ("GET", object_path("batch/v1", "jobs", "team-a", "j")),
        ("PATCH", object_path("batch/v1", "jobs", "team-a", "j")),
        ("GET", object_path("batch.volcano.sh/v1alpha1", "jobs", "team-a", "vj")),
        ("PATCH", object_path("batch.volcano.sh/v1alpha1", "jobs", "team-a", "vj")),
        ("POST", object_path("bus.volcano.sh/v1alpha1", "commands", "team-a", None)),
        ("POST", "/api/v1/namespaces/team-a/events"),
        # preemption and drains go through the Eviction API
        ("POST", f"{pod_path('team-a', 'p')}/eviction"),
        # spend, and the copy OPA loads at start (controller/act/opa_files.py)
        ("GET", namespace_path("team-a")),
        ("PATCH", namespace_path("team-a")),
        (
            "PATCH",
            object_path("v1", "configmaps", "fleetplane-system", "fleetplane-opa-controller-data"),
        ),
        ("POST", object_path("v1", "configmaps", "fleetplane-system", None)),
        # driver upgrades: cordon, state labels, driver pod restarts
        ("GET", object_path("v1", "nodes", None, "gpu-1")),
        ("PATCH", object_path("v1", "nodes", None, "gpu-1")),
        ("DELETE", pod_path("gpu-operator", "nvidia-driver-daemonset-x")),
        # leases
        ("POST", object_path("coordination.k8s.io/v1", "leases", "fleetplane-system", None)),
        *[
            (method, object_path("coordination.k8s.io/v1", "leases", "fleetplane-system", name))
            for method in ("GET", "PATCH")
            for name in (
                "fleetplane-controller",
                "fleetplane-controller-upgrade",
                "fleetplane-controller-health",
            )
        ],
    ],
)
def test_every_request_the_controller_makes_is_authorized(prod_controller, method, path) -> None:
    _, declared = prod_controller
    assert authorized(declared, method, path)


def test_cronjob(prod_controller) -> None:
    fleet, declared = prod_controller
    crons = {c["metadata"]["name"]: c for c in declared.kind("CronJob")}
    assert set(crons) == {
        "fleetplane-controller",
        "fleetplane-controller-upgrade",
        "fleetplane-controller-health",
    }
    upgrade = crons["fleetplane-controller-upgrade"]["spec"]["jobTemplate"]["spec"]["template"]
    assert upgrade["spec"]["containers"][0]["command"] == [
        "fleetplane",
        "controller",
        "upgrade",
        "run",
    ]
    assert crons["fleetplane-controller-upgrade"]["spec"]["concurrencyPolicy"] == "Forbid"
    health = crons["fleetplane-controller-health"]["spec"]["jobTemplate"]["spec"]["template"]
    assert health["spec"]["containers"][0]["command"] == [
        "fleetplane",
        "controller",
        "remediation",
        "run",
    ]
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    for job in crons.values():  # every CronJob runs a command the CLI knows
        parser.parse_args(job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"][1:])  # fmt: skip
    cron = crons["fleetplane-controller"]
    spec = cron["spec"]
    assert spec["schedule"] == "*/5 * * * *"
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["suspend"] is False
    pod = spec["jobTemplate"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["fleetplane", "controller", "reconcile"]
    assert container["image"] == fleet.controller.image
    assert {
        "name": "FLEETPLANE_CONFIG",
        "value": "/etc/fleetplane/config/config.json",
    } in container["env"]
    assert pod["serviceAccountName"] == "fleetplane-controller"
    assert pod["restartPolicy"] == "Never"
    # the bearer token OPA requires: the gate's Secret, where the rendered config says
    assert {
        "name": "opa-token",
        "secret": {"secretName": "fleetplane-opa-controller-token"},
    } in pod["volumes"]
    assert {
        "name": "opa-token",
        "mountPath": "/etc/fleetplane/opa-token",
        "readOnly": True,
    } in container["volumeMounts"]
    assert render_opa_data(fleet)["controller"]["opa_token_file"] == (
        "/etc/fleetplane/opa-token/token"
    )
    (config,) = [
        c
        for c in declared.kind("ConfigMap")
        if c["metadata"]["name"] == "fleetplane-controller-config"
    ]
    assert json.loads(config["data"]["config.json"]) == json.loads(
        json.dumps(render_opa_data(fleet))
    )
    assert all("ControllerJob$kubernetes:" in u for u in declared.urns if "kubernetes:" in u)


def test_local_cronjob_is_suspended(declare: Declare, stack_fleets: dict[str, FleetConfig]) -> None:
    fleet = stack_fleets["local"]
    declared = declare(lambda: ControllerJob("local-controller", ControllerJobArgs(fleet=fleet)))
    crons = declared.kind("CronJob")
    assert len(crons) == 3
    assert all(c["spec"]["suspend"] is True and c["spec"]["schedule"] == "* * * * *" for c in crons)
    (keeper,) = declared.kind("Deployment")
    assert keeper["spec"]["replicas"] == 0  # nothing of the controller runs in the cluster
    (role,) = declared.kind("Role")
    assert all(r["apiGroups"] != ["discovery.k8s.io"] for r in role["rules"])  # no in-cluster OPA


def test_the_admission_keeper_runs_the_controller_image_under_its_own_lease(
    prod_controller,
) -> None:
    """One replica of `fleetplane controller admission --watch`, never two at once in a
    rollout, with the CronJobs' pod (account, configuration, OPA token); the Lease it takes
    is one the Role lets it renew, and the command is one the CLI knows."""
    fleet, declared = prod_controller
    (keeper,) = declared.kind("Deployment")
    assert keeper["metadata"]["name"] == "fleetplane-controller-admission"
    spec = keeper["spec"]
    assert spec["replicas"] == 1 and spec["strategy"] == {"type": "Recreate"}
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"] == ["fleetplane", "controller", "admission", "--watch"]
    assert container["image"] == fleet.controller.image
    assert pod["serviceAccountName"] == "fleetplane-controller"
    assert set(spec["selector"]["matchLabels"].items()) <= set(
        spec["template"]["metadata"]["labels"].items()
    )
    (cron,) = [
        c for c in declared.kind("CronJob") if c["metadata"]["name"] == "fleetplane-controller"
    ]
    cron_pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert pod["volumes"] == cron_pod["volumes"]
    assert container["volumeMounts"] == cron_pod["containers"][0]["volumeMounts"]
    assert container["env"] == cron_pod["containers"][0]["env"]
    (role,) = declared.kind("Role")
    renewable = {
        name
        for rule in role["rules"]
        if "leases" in rule["resources"] and "patch" in rule["verbs"]
        for name in rule.get("resourceNames", [])
    }
    assert fleet.controller.lease_name + LEASE_SUFFIX in renewable
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(container["command"][1:])
    assert args.watch is True and args.watch_interval == 1.0


def test_the_admission_keeper_rolls_when_the_configuration_changes(
    declare: Declare, stack_fleets: dict[str, FleetConfig]
) -> None:
    """It reads its configuration once, at start: a change of the rendered document changes
    its pod template (so the Deployment rolls), the same document does not."""
    from components.controller_job import controller_manifests

    fleet = stack_fleets["prod"]

    def template_annotations(config: FleetConfig) -> dict[str, str]:
        (keeper,) = [m for m in controller_manifests(config) if m["kind"] == "Deployment"]
        return keeper["spec"]["template"]["metadata"]["annotations"]

    first = fleet.teams[0]
    richer = fleet.model_copy(
        update={
            "teams": [
                first.model_copy(update={"monthly_budget_usd": first.monthly_budget_usd + 1000}),
                *fleet.teams[1:],
            ]
        }
    )
    assert template_annotations(fleet) == template_annotations(fleet.model_copy(deep=True))
    assert template_annotations(fleet) != template_annotations(richer)
    assert set(template_annotations(fleet)) == {"fleetplane.dev/config-sha256"}
