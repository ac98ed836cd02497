"""The local stack end to end, through the real `pulumi` CLI and Kubernetes provider.

One lifecycle on a control plane of its own, with its own Pulumi backend and PULUMI_HOME in a
temporary directory and a copy of `stacks/Pulumi.local.yaml` that points at that cluster and at
free loopback ports for every server (passed as `--config-file`; Alertmanager takes a free port
of itself), so it passes beside a running main job (`make up`, then `make test`):

1. `up`: the fleet's objects exist in the cluster, the gate's OPA serves on loopback, and
   the scenario's pods were placed by fgd (the default), the placement service on loopback;
2. the gate, in the cluster: a workload applied as a member of a team is admitted, one that
   breaks a policy is denied with the webhook's message;
3. a second `pulumi up` changes nothing;
4. a team's quota changed in the configuration: `pulumi preview --diff` shows that change and
   nothing else, and `pulumi up` applies it;
5. `pulumi destroy` removes every object it created.

Missing tools fail the test (with the bootstrap hint); nothing is skipped.
"""

from __future__ import annotations

import copy
import json
import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests
import yaml

from localfleet.controlplane import BIN_DIR, free_port
from localfleet.stack import LocalStack
from observability.dashboards import dashboards, panel_queries
from tests.alert_receiver import alert_receiver

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
STACK_FILE = ROOT / "stacks" / "Pulumi.local.yaml"
TOOLS = (
    "pulumi",
    "pulumi-language-python",
    "pulumi-language-python-exec",
    "pulumi-resource-kubernetes",
    "opa",
    "prometheus",
    "etcd",
    "kube-apiserver",
    "kubectl",
    "kwok",
    "karpenter-kwok",
)
TEAM_USER = ["--as=alice", "--as-group=ml-research-engineers"]
TEAM_NAMESPACE = "ml-research"


def training_pod(name: str, image: str) -> dict[str, Any]:
    """8 on-demand H100 for research's training: within every rule of the local stack."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": TEAM_NAMESPACE,
            "labels": {"fleetplane.dev/workload-type": "training", "app": name},
            "annotations": {"scheduling.volcano.sh/queue-name": "research"},
        },
        "spec": {
            "priorityClassName": "fleetplane-training",
            "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "containers": [
                {
                    "name": "main",
                    "image": image,
                    "resources": {"limits": {"nvidia.com/gpu": "8"}},
                }
            ],
        },
    }


@pytest.fixture(scope="module")
def alerts() -> Iterator[tuple[str, queue.Queue[dict[str, Any]]]]:
    """An Alertmanager webhook receiver: (its URL, each notification's body in arrival order)."""
    with alert_receiver() as found:
        yield found


def alert_arrives(
    received: queue.Queue[dict[str, Any]], name: str, team: str, timeout: float
) -> dict[str, Any]:
    """The first firing `name` alert for `team` the receiver gets within `timeout` seconds."""
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while (left := deadline - time.monotonic()) > 0:
        try:
            notification = received.get(timeout=left)
        except queue.Empty:
            break
        for alert in notification.get("alerts", []):
            labels = alert.get("labels", {})
            seen.append(f"{labels.get('alertname')}/{labels.get('team')}/{alert.get('status')}")
            wanted = (labels.get("alertname"), labels.get("team")) == (name, team)
            if wanted and alert.get("status") == "firing":
                return alert
    raise AssertionError(f"no firing {name} for {team} within {timeout:.0f}s; got {seen}")


@pytest.fixture(scope="module")
def stack(
    tmp_path_factory: pytest.TempPathFactory,
    alerts: tuple[str, queue.Queue[dict[str, Any]]],
) -> Iterator[LocalStack]:
    missing = [name for name in TOOLS if not (BIN_DIR / name).exists()]
    if missing:
        pytest.fail(
            f"missing tool(s) {', '.join(missing)} in {BIN_DIR}: run `make tools` "
            "(python -m tools.bootstrap)"
        )
    state = tmp_path_factory.mktemp("localstack")
    config = yaml.safe_load(STACK_FILE.read_text())
    settings = config["config"]
    settings["fleetplane:kubeconfig"] = str(state / "local" / "kubeconfig")
    fleet = settings["fleetplane:fleet"]
    fleet["opa"]["external_url"] = f"https://127.0.0.1:{free_port()}"
    fleet["controller"]["opa_url"] = f"http://127.0.0.1:{free_port()}"
    fleet["controller"]["prometheus_url"] = f"http://127.0.0.1:{free_port()}"
    # every server of this stack on a port of its own: a main job's stack may be up beside it
    fleet["observability"]["pushgateway"]["url"] = f"http://127.0.0.1:{free_port()}"
    fleet["volcano"]["placement_url"] = f"http://127.0.0.1:{free_port()}"
    config_file = state / "Pulumi.local.yaml"
    config_file.write_text(yaml.safe_dump(config, sort_keys=False))
    local = LocalStack(state_dir=state, config_file=config_file, log=print, alert_webhook=alerts[0])
    try:
        yield local
    finally:
        local.down()


def preview_steps(stack: LocalStack) -> list[dict[str, Any]]:
    """The steps of `pulumi preview --diff --json` that change something."""
    result = stack.pulumi("preview", "--diff", "--json", capture=True)
    steps = json.loads(result.stdout).get("steps", [])
    return [step for step in steps if step.get("op") != "same"]


def name_of(urn: str) -> str:
    return urn.rsplit("::", 1)[-1]


# Panels the scenario leaves empty, and why (any other empty panel fails the test).
EMPTY_AFTER_SCENARIO = {
    "fleetplane-fleet.json / GPUs with an Xid error": "the scenario injects no GPU fault",
    "fleetplane-fleet.json / Driver upgrade: nodes by pool and state": (
        "the main job runs no driver-upgrade pass (its panels are checked in tests/observability)"
    ),
    "fleetplane-fleet.json / Driver rollouts halted": "the main job runs no driver-upgrade pass",
    "fleetplane-fleet.json / GPU remediation: nodes by pool and state": (
        "the main job runs no GPU-remediation pass"
    ),
}


def panel_answers(prometheus_url: str) -> tuple[list[str], list[str]]:
    """Every dashboard panel's query, as Grafana sends it (all teams, the last hour), asked of
    the stack's Prometheus: (queries that errored, queries that returned nothing)."""
    errors, empty = [], []
    for board, model in dashboards().items():
        for title, expr in panel_queries(model):
            concrete = expr.replace("$__range", "1h").replace("$__interval", "15s")
            concrete = concrete.replace("$team", ".+")
            answer = requests.get(
                f"{prometheus_url}/api/v1/query", params={"query": concrete}, timeout=30
            )
            body = answer.json()
            where = f"{board} / {title}"
            if answer.status_code != 200 or body.get("status") != "success":
                errors.append(f"{where}: {concrete} -> {body.get('error', answer.status_code)}")
            elif not body["data"]["result"]:
                empty.append(where)
    return errors, empty


def test_local_stack_lifecycle(
    stack: LocalStack, alerts: tuple[str, queue.Queue[dict[str, Any]]]
) -> None:
    # 1. up ---------------------------------------------------------------------------------
    started = time.monotonic()
    summary = stack.up()
    print(summary)
    print(
        f"local stack up (cluster, pulumi up, gate, controller) in {time.monotonic() - started:.0f}s"
    )
    cluster = stack.cluster
    namespaces = {
        item["metadata"]["name"]
        for item in cluster.get_json("namespaces", "-l", "fleetplane.dev/team")["items"]
    }
    assert namespaces == {"ml-research", "serving", "analytics"}
    queues = {
        q["metadata"]["name"] for q in cluster.get_json("queues.scheduling.volcano.sh")["items"]
    }
    # Volcano's controllers add their own `root` and `default` queues beside the teams'.
    assert queues - {"root", "default"} == {"research", "serving", "analytics"}
    # A team's quota is its queue's capability: no per-namespace ResourceQuota repeats it. The
    # only ResourceQuotas are the claimed-GPU ones of one-namespace teams, which the queue does
    # not count (components/dra_quota.py).
    quotas = cluster.get_json("resourcequota", "-A", "-l", "fleetplane.dev/team")["items"]
    assert all(
        set(q["spec"]["hard"]) == {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices"}
        for q in quotas
    )
    analytics_queue = cluster.get_json("queues.scheduling.volcano.sh", "analytics")
    assert analytics_queue["spec"]["capability"]["nvidia.com/gpu"] == "16"
    classes = {pc["metadata"]["name"] for pc in cluster.get_json("priorityclasses")["items"]}
    assert {"fleetplane-training", "fleetplane-inference", "fleetplane-notebook"} <= classes
    cronjob = cluster.get_json("cronjob", "fleetplane-controller", "-n", "fleetplane-system")
    assert cronjob["spec"]["suspend"] is True
    webhook = cluster.get_json("validatingwebhookconfiguration", "fleetplane-opa")
    (hook,) = webhook["webhooks"]
    assert hook["clientConfig"]["url"].startswith(stack.fleet().opa.external_url)
    assert hook["failurePolicy"] == "Fail"
    assert "policy gate: enforcing" in summary and "OPA healthy" in summary
    assert "helm charts: off" in summary
    assert "volcano 1.15.1: vc-webhook-manager" in summary
    # placement by default as a fleet with the controller's image has it: fgd, the scheduler's
    # extender calling the placement service the stack runs on loopback, which the scenario's
    # pods were scored by
    placement_url = stack.fleet().volcano.placement_url
    assert f"placement: fgd, the placement service at {placement_url} running" in summary
    scored = requests.get(f"{placement_url}/metrics", timeout=10).text
    answered = [
        float(line.rsplit(" ", 1)[1])
        for line in scored.splitlines()
        if line.startswith('fleetplane_placement_requests_total{verb="prioritize",outcome="ok"}')
    ]
    assert answered and answered[0] > 0, scored[:2000]
    # the scenario played on the live fleet: Volcano placed, the controller warned, preempted
    # a gang whole and reclaimed, the gate refused
    assert "=== scenario: the fleet at work ===" in summary
    decided = summary.split("the controller decided:", 1)[-1]
    for decision in ("idle.warn", "idle.reclaim", "preempt.preempt", "gang of ml-research/"):
        assert decision in summary, f"{decision} missing; the controller decided:{decided}"
    assert "workload-type: pod has no label" in summary
    assert "budget: team analytics would reach" in summary
    # two passes at least (warn, then reclaim), more where a pass found partial evidence
    passes = summary.split("controller passes: ", 1)[-1].splitlines()[0].split(", ")
    assert len(passes) >= 2 and set(passes) == {"ok"}, passes
    # Karpenter's pool, empty at first, grew to its two nodes for the A10G gang and, the gang
    # finished, its empty nodes were consolidated away (localfleet/scenario_karpenter.py)
    karpenter = summary.split("Karpenter (autoscaled pools):", 1)[-1]
    assert "pool a10g-ondemand: 0 -> 2 nodes for gang ml-research/a10g-eval" in summary, karpenter
    assert "pool a10g-ondemand: 2 -> 0 nodes, consolidated" in summary, karpenter
    assert not cluster.get_json("nodes", "-l", "karpenter.sh/nodepool")["items"]
    assert not cluster.get_json("nodeclaims")["items"]
    # the month's chargeback, from the local Prometheus, where the summary says
    assert "chargeback report for this month, written:" in summary
    reports = stack.services_dir / "reports"
    assert any(reports.glob("*.csv")) and any(reports.glob("*.html")), sorted(reports.iterdir())
    # every dashboard panel answers from what the scenario left in the stack's Prometheus,
    # once the last pass's push has been scraped twice (a counter's increase needs 2 samples)
    deadline = time.monotonic() + 60
    while True:
        errors, empty = panel_answers(stack.fleet().controller.prometheus_url)
        unexplained = [where for where in empty if where not in EMPTY_AFTER_SCENARIO]
        if errors or not unexplained or time.monotonic() > deadline:
            break
        time.sleep(5)
    print("panels without data after the scenario:", *empty, sep="\n  ")
    assert errors == []
    assert unexplained == []

    # 2. the gate, in the cluster, as a member of the research team ------------------------
    allowed = cluster.kubectl(
        *TEAM_USER,
        "apply",
        "-f",
        "-",
        input=json.dumps(training_pod("train-ok", "nvcr.io/nvidia/pytorch:24.05-py3")),
        check=False,
    )
    assert allowed.returncode == 0, allowed.stderr
    denied = cluster.kubectl(
        *TEAM_USER,
        "apply",
        "-f",
        "-",
        input=json.dumps(training_pod("train-denied", "docker.io/library/busybox:1.36")),
        check=False,
    )
    assert denied.returncode != 0
    assert 'admission webhook "admission.fleetplane.dev" denied the request' in denied.stderr
    assert "docker.io/library/busybox" in denied.stderr, denied.stderr
    cluster.kubectl("delete", "pod", "train-ok", "-n", TEAM_NAMESPACE, "--wait=false")

    # 3. a second up changes nothing -------------------------------------------------------
    assert preview_steps(stack) == []
    started = time.monotonic()
    stack.pulumi("up", "--yes", "--expect-no-changes")
    print(f"second pulumi up (no changes) in {time.monotonic() - started:.0f}s")

    # 4. a quota and a budget change: those changes, everywhere they are written, and nothing
    # else; the budget, set under what analytics has spent this month, pages its owners: the
    # next pass pushes the ratio, Prometheus' rule fires, Alertmanager posts to the receiver
    assert stack.config_file is not None
    config = yaml.safe_load(stack.config_file.read_text())
    changed = copy.deepcopy(config)
    teams = changed["config"]["fleetplane:fleet"]["teams"]
    analytics = next(team for team in teams if team["name"] == "analytics")
    analytics["quota"]["nvidia.com/gpu"] = 24
    (spent,) = requests.get(
        f"{stack.fleet().controller.prometheus_url}/api/v1/query",
        params={"query": 'fleetplane_team_spend_usd{team="analytics"}'},
        timeout=30,
    ).json()["data"]["result"]
    assert float(spent["value"][1]) > 0, spent
    analytics["monthly_budget_usd"] = round(float(spent["value"][1]) * 0.9, 4)
    stack.config_file.write_text(yaml.safe_dump(changed, sort_keys=False))
    steps = preview_steps(stack)
    assert {(step["op"], name_of(step["urn"])) for step in steps} == {
        # the team's Volcano queue (its quota), the rendered document that OPA and
        # the controller read, and the admission keeper, which reads it once at start (its
        # pod template carries the document's hash, so it rolls)
        ("update", "local-volcano-analytics"),
        # analytics has one namespace, so its claimed GPUs have a ResourceQuota at the same
        # quota (components/dra_quota.py)
        ("update", "local-analytics-analytics-dra-devices"),
        ("update", "local-opa-fleetplane-system-fleetplane-opa-data"),
        ("update", "local-controller-fleetplane-system-fleetplane-controller-config"),
        ("update", "local-controller-fleetplane-system-fleetplane-controller-admission"),
    }, json.dumps(steps, indent=2)[:4000]
    stack.pulumi("up", "--yes")
    analytics_queue = cluster.get_json("queues.scheduling.volcano.sh", "analytics")
    assert analytics_queue["spec"]["capability"]["nvidia.com/gpu"] == "24"
    assert stack.controller_pass() == 0
    alert = alert_arrives(alerts[1], "FleetplaneTeamBudgetExhausted", "analytics", timeout=120)
    assert "analytics" in alert["annotations"]["summary"], alert

    # 5. destroy removes everything it created ---------------------------------------------
    stack.pulumi("destroy", "--yes")
    assert stack.resource_count() == 0
    left = cluster.get_json("namespaces", "-l", "fleetplane.dev/team")["items"]
    assert [ns for ns in left if ns.get("status", {}).get("phase") != "Terminating"] == []
    assert (
        cluster.kubectl(
            "get", "validatingwebhookconfiguration", "fleetplane-opa", check=False
        ).returncode
        != 0
    )
    # Volcano's CRDs belong to the local fleet's Volcano (installed from its release), not to
    # the stack: they stay after destroy.
    classes = {pc["metadata"]["name"] for pc in cluster.get_json("priorityclasses")["items"]}
    assert not any(name.startswith("fleetplane-") for name in classes)


def test_python_sdks_are_the_releases_of_the_pinned_cli_and_provider() -> None:
    """The SDK asks the engine for the provider at its own version, and the CLI and the SDK
    speak one protocol release: pyproject.toml pins what tools/go/pulumi* build."""
    from tools import bootstrap

    tools = {tool.name: tool.version.lstrip("v") for tool in bootstrap.pinned_tools()}
    text = (ROOT / "pyproject.toml").read_text()
    assert f'"pulumi=={tools["pulumi"]}"' in text
    assert f'"pulumi-kubernetes=={tools["pulumi-resource-kubernetes"]}"' in text
