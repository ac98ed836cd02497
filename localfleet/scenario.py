"""A short scenario on the live local fleet, so `fleetplane up` shows the product at work.

After `pulumi up` and the first controller pass, teams submit work (in about two minutes):

- serving: an inference Deployment on on-demand H100 (never preempted);
- research: two training gangs (Volcano Jobs, 2 x 8 H100 each), one of them checkpointed a
  moment ago, and a busy notebook; the H100 pool is then full;
- research: an urgent high-priority evaluation (8 H100) that waits for room;
- analytics: a notebook left idle (the DCGM exporter stand-in reports 0 % for it), a spot
  batch Job written as the team had it (naming no queue: the platform fills in the team's), and a second batch Job that takes the team over its queue's capability and waits;
- the gate refuses a pod without a workload type and one whose price exceeds the team's budget.

Then two controller passes, as the CronJob would run them: the first warns the idle notebook
and, the urgent evaluation having waited past `controller.preemption_pending_seconds`, preempts
the gang with the least work to lose (the checkpointed one, whole); the second reclaims the
notebook after its grace. The account at the end: per team, accelerators held against the
queue's capability and the team's share, queue wait p50/p95, spend, and every decision with its
reason (from the controller's log). After it, Karpenter's scene: a pool with no node grows for a
gang and shrinks after it (localfleet.scenario_karpenter).
"""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fleet import labels
from localfleet.controlplane import LocalCluster
from localfleet.scenario_karpenter import play_karpenter_scene
from localfleet.scenario_log import (
    ScenarioRun,
    controller_actions,
    idle_events,
    pass_errors,
)
from localfleet.scenario_operators import submit_operator_work

H100 = "NVIDIA-H100-80GB-HBM3"
A100 = "NVIDIA-A100-SXM4-40GB"
IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
SCENARIO_LABEL = "fleetplane.dev/scenario"
GPU_TOLERATION = {"key": labels.GPU_RESOURCE, "operator": "Exists", "effect": "NoSchedule"}
SPOT_TOLERATION = {"key": labels.CAPACITY_TYPE, "operator": "Exists", "effect": "NoSchedule"}


def _pod_spec(
    gpus: int,
    product: str,
    priority_class: str,
    *,
    spot: bool = False,
    restart: str | None = None,
    deadline: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "priorityClassName": priority_class,
        "nodeSelector": {labels.GPU_PRODUCT: product},
        "tolerations": [GPU_TOLERATION, *([SPOT_TOLERATION] if spot else [])],
        "containers": [
            {
                "name": "main",
                "image": IMAGE,
                "resources": {"limits": {labels.GPU_RESOURCE: str(gpus)}},
            }
        ],
    }
    if spot:
        spec["nodeSelector"][labels.CAPACITY_TYPE] = "spot"
    if restart:
        spec["restartPolicy"] = restart
    if deadline:
        spec["activeDeadlineSeconds"] = deadline
    return spec


def _meta(name: str, namespace: str, workload_type: str | None, **extra: Any) -> dict[str, Any]:
    meta_labels = {SCENARIO_LABEL: "up", "app": name}
    if workload_type:
        meta_labels[labels.WORKLOAD_TYPE] = workload_type
    return {"name": name, "namespace": namespace, "labels": meta_labels, **extra}


QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
TEAM_QUEUES = {"ml-research": "research", "serving": "serving", "analytics": "analytics"}


def pod(
    name: str,
    namespace: str,
    workload_type: str | None,
    spec: dict[str, Any],
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    meta = _meta(name, namespace, workload_type)
    # Every accelerator pod of a team names its team's queue (the gate requires it: see
    # `_template_meta`).
    named = {QUEUE_ANNOTATION: TEAM_QUEUES[namespace]} if namespace in TEAM_QUEUES else {}
    if annotations or named:
        meta["annotations"] = {**named, **(annotations or {})}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


NOTEBOOK = {labels.IDLE_TIMEOUT_SECONDS: "3600"}
"""Notebooks declare their idle timeout (the gate requires it)."""
NOTEBOOK_KEY = "analytics/eda-notebook"
"""The notebook the scenario leaves idle: warned by one pass, reclaimed by a later one."""


def _template_meta(
    name: str, namespace: str, workload_type: str, *, plain: bool = False
) -> dict[str, Any]:
    """A pod template's metadata, naming the team's queue: Volcano 1.15's PodGroup controller
    rebuilds the PodGroup of a workload of several pods from each pod and sets its queue from
    the pod's annotation only, so without it the second pod's update puts the group back in
    the `default` queue, outside the team's quota. `plain`: the manifest a team already has,
    naming no queue; the platform fills in the team's at admission (components.queue_defaults)
    before the gate judges it."""
    template_meta: dict[str, Any] = {"labels": _meta(name, namespace, workload_type)["labels"]}
    if not plain:
        template_meta["annotations"] = {QUEUE_ANNOTATION: TEAM_QUEUES[namespace]}
    return template_meta


def deployment(
    name: str,
    namespace: str,
    workload_type: str,
    replicas: int,
    spec: dict[str, Any],
    *,
    plain: bool = False,
) -> dict[str, Any]:
    """A Deployment; `plain`: as the team wrote it, naming no queue (see `_template_meta`)."""
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, namespace, workload_type),
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            # Replaced in place, one pod at a time: the gate counts a rollout's surge pods in
            # what a Deployment holds, and these run at their workload type's maximum.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 0, "maxUnavailable": 1},
            },
            "template": {
                "metadata": _template_meta(name, namespace, workload_type, plain=plain),
                "spec": spec,
            },
        },
    }


def batch_job(
    name: str, namespace: str, spec: dict[str, Any], *, plain: bool = False
) -> dict[str, Any]:
    """A batch/v1 Job; `plain`: as the team wrote it, naming no queue (see `_template_meta`)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": _meta(name, namespace, "batch"),
        "spec": {
            "backoffLimit": 0,
            "template": {
                "metadata": _template_meta(name, namespace, "batch", plain=plain),
                "spec": spec,
            },
        },
    }


def gang(
    name: str,
    namespace: str,
    queue: str,
    members: int,
    spec: dict[str, Any],
    annotations: dict[str, str],
) -> dict[str, Any]:
    """A Volcano Job whose `members` pods run together or not at all (minAvailable)."""
    template_meta = {
        "labels": _meta(name, namespace, "training")["labels"],
        "annotations": annotations,
    }
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "metadata": _meta(name, namespace, "training"),
        "spec": {
            "minAvailable": members,
            "queue": queue,
            "schedulerName": "volcano",
            "tasks": [
                {
                    "name": "worker",
                    "replicas": members,
                    "template": {"metadata": template_meta, "spec": spec},
                }
            ],
        },
    }


def _scheduled_at(pod_obj: dict[str, Any]) -> float | None:
    from datetime import datetime

    for condition in pod_obj.get("status", {}).get("conditions", []) or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "True":
            return datetime.fromisoformat(
                condition["lastTransitionTime"].replace("Z", "+00:00")
            ).timestamp()
    return None


def _created(pod_obj: dict[str, Any]) -> float:
    from datetime import datetime

    return datetime.fromisoformat(
        pod_obj["metadata"]["creationTimestamp"].replace("Z", "+00:00")
    ).timestamp()


def queue_waits(pods: list[dict[str, Any]], now: float) -> tuple[list[float], int]:
    """Seconds from creation to placement of the placed pods, and how many still wait."""
    waits, waiting = [], 0
    for p in pods:
        placed = _scheduled_at(p)
        if placed is None:
            waiting += 1
        else:
            waits.append(max(0.0, placed - _created(p)))
    return waits, waiting


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    if len(ordered) == 1:
        return ordered[0]
    return float(statistics.quantiles(ordered, n=100, method="inclusive")[int(fraction * 100) - 1])


def gpus_held(pods: list[dict[str, Any]]) -> int:
    held = 0
    for p in pods:
        if not p.get("spec", {}).get("nodeName") or p.get("status", {}).get("phase") not in (
            "Running",
            "Pending",
        ):
            continue
        for c in p["spec"].get("containers", []):
            held += int((c.get("resources", {}).get("limits") or {}).get(labels.GPU_RESOURCE, 0))
    return held


@dataclass
class Scenario:
    """The scenario on a running local stack (`stack`: a `localfleet.stack.LocalStack`)."""

    stack: Any
    log: Callable[[str], None] = field(default=lambda message: None)
    run_state: ScenarioRun = field(default_factory=ScenarioRun)

    @property
    def cluster(self) -> LocalCluster:
        cluster: LocalCluster = self.stack.cluster
        return cluster

    def submit(self, objects: list[dict[str, Any]]) -> None:
        self.cluster.apply(objects)

    def refuse(self, what: str, obj: dict[str, Any]) -> None:
        """Submit `obj`, expecting the gate to refuse it; record the gate's message."""
        result = self.cluster.kubectl("create", "-f", "-", input=json.dumps(obj), check=False)
        if result.returncode == 0:
            self.run_state.refused.append((what, "ADMITTED (expected a refusal)"))
            return
        message = result.stderr.strip().split("denied the request:", 1)[-1].strip()
        self.run_state.refused.append((what, message))

    def set_gpu_values(self, namespace: str, pod_name: str, values: dict[str, float]) -> None:
        import urllib.request

        address = self.stack.exporter_address()
        if address is None:
            return
        request = urllib.request.Request(
            f"http://{address}/v1/pods/{namespace}/{pod_name}",
            data=json.dumps(values).encode(),
            method="PUT",
        )
        with urllib.request.urlopen(request, timeout=5):
            pass

    def wait(self, what: str, check: Callable[[], bool], timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if check():
                return True
            time.sleep(1)
        self.log(f"scenario: {what}: not reached after {timeout:.0f}s, going on")
        return False

    def pods(self, namespace: str | None = None) -> list[dict[str, Any]]:
        where = ["-n", namespace] if namespace else ["-A"]
        return list(self.cluster.get_json("pods", *where, "-l", f"{SCENARIO_LABEL}=up")["items"])

    def placed(self, prefixes: tuple[str, ...] = ("",)) -> int:
        """How many of the scenario's pods whose name starts with one of `prefixes` are bound."""
        return sum(
            1
            for p in self.pods()
            if p.get("spec", {}).get("nodeName") and p["metadata"]["name"].startswith(prefixes)
        )

    def controller_pass(self) -> None:
        code = self.stack.controller_pass()
        self.run_state.passes.append(code)
        log_path: Path = self.stack.services_dir / "controller" / "reconcile.log"
        text = log_path.read_text(errors="replace")
        self.run_state.decisions += controller_actions(text)
        self.run_state.failures.append(pass_errors(text) if code else [])
        self.run_state.notebook.append(idle_events(text, NOTEBOOK_KEY))

    def pass_until(self, event: str, *, until: float, every: float) -> float | None:
        """As the CronJob's next runs would: a pass that found the notebook's evidence partial
        (one scrape missed on a loaded machine) keeps it, and a later pass, `every` seconds on,
        decides what that one would have (`idle.warn`, `idle.reclaim`), while there is time
        (before `until`). When the notebook's `event` was decided (epoch seconds), or None."""
        while (at := self._decided(event, NOTEBOOK_KEY)) is None and time.time() + every < until:
            last = self.run_state.notebook[-1] if self.run_state.notebook else []
            why = "; ".join(last)
            self.log(
                f"scenario: no {event} for the notebook ({why or 'no idle event for it in the pass'}); "
                f"another pass in {every:g}s"
            )
            time.sleep(every)
            self.controller_pass()
        return at

    def notebook_account(self) -> list[str]:
        """Why the idle notebook was not reclaimed, pass by pass (nothing when it was)."""
        if self._reclaimed(NOTEBOOK_KEY):
            return []
        return [f"  {NOTEBOOK_KEY} not reclaimed; its judgements:"] + [
            f"    scenario pass {i}: {'; '.join(notes) or '(nothing logged)'}"
            for i, notes in enumerate(self.run_state.notebook, 1)
        ]

    def _decided(self, event: str, pod_key: str) -> float | None:
        """When the controller's first `event` about `pod_key` was (epoch seconds), or None."""
        for d in self.run_state.decisions:
            if d.event == event and d.target.endswith(pod_key):
                return _epoch(d.at) or time.time()  # no time logged: the pass just run
        return None

    def _reclaimed(self, pod_key: str) -> bool:
        return self._decided("idle.reclaim", pod_key) is not None

    def run(self) -> str:
        fleet = self.stack.fleet()
        started = time.monotonic()
        now = time.time()
        self.log("scenario: teams submit work")
        self.submit(
            [
                deployment(
                    "chat-api",
                    "serving",
                    "inference",
                    2,
                    _pod_spec(8, H100, "fleetplane-inference"),
                ),
                deployment(
                    "embed-api",
                    "serving",
                    "inference",
                    2,
                    _pod_spec(8, H100, "fleetplane-inference"),
                ),
                gang(
                    "pretrain-ckpt",
                    "ml-research",
                    "research",
                    2,
                    _pod_spec(8, H100, "fleetplane-training", restart="OnFailure"),
                    {labels.LAST_CHECKPOINT: str(int(now))},
                ),
                gang(
                    "finetune",
                    "ml-research",
                    "research",
                    2,
                    _pod_spec(8, H100, "fleetplane-training", restart="OnFailure"),
                    {},
                ),
                pod(
                    "research-notebook",
                    "ml-research",
                    "notebook",
                    _pod_spec(1, A100, "fleetplane-notebook", spot=True),
                    NOTEBOOK,
                ),
                pod(
                    "eda-notebook",
                    "analytics",
                    "notebook",
                    _pod_spec(1, A100, "fleetplane-notebook", spot=True),
                    NOTEBOOK,
                ),
                # as the team wrote it: no queue named, the platform fills in analytics'
                batch_job(
                    "nightly-etl",
                    "analytics",
                    _pod_spec(8, A100, "fleetplane-batch", spot=True, restart="Never"),
                    plain=True,
                ),
            ]
        )
        # The operators' kinds, as ML teams write them: a TrainJob gang and a RayJob
        # (localfleet.scenario_operators), through the gate, their operators and Volcano.
        self.run_state.refused += submit_operator_work(
            self.cluster,
            namespace="ml-research",
            queue=TEAM_QUEUES["ml-research"],
            # on spot A100s, beside the notebooks: the on-demand H100s are the preemption's
            node_selector={labels.GPU_PRODUCT: A100, labels.CAPACITY_TYPE: "spot"},
            priority_class="fleetplane-training",
            scenario_labels={SCENARIO_LABEL: "up"},
            tolerations=[GPU_TOLERATION, SPOT_TOLERATION],
        )
        # The analytics notebook is idle from its start: set before the first wave is waited
        # for, since the first pass judges the 60 s window from 2 s after the notebook's
        # start; set after the wave, its first seconds read busy (a GPU with a holder defaults
        # to busy) for as long as the wave took to place, and the warning came a pass late.
        self.set_gpu_values(
            "analytics",
            "eda-notebook",
            {
                "DCGM_FI_DEV_GPU_UTIL": 0,
                "DCGM_FI_PROF_GR_ENGINE_ACTIVE": 0,
                "DCGM_FI_DEV_FB_USED": 300,
            },
        )
        # both H100 gangs whole before the urgent evaluation comes: the operators' pods also
        # count towards 11, and an evaluation placed ahead of a gang leaves nothing to preempt
        self.wait(
            "the first wave placed",
            lambda: self.placed() >= 11 and self.placed(("pretrain-ckpt-", "finetune-")) == 4,
            90,
        )
        self.log("scenario: the urgent evaluation and a batch over analytics' queue capability")
        self.submit(
            [
                pod(
                    "urgent-eval",
                    "ml-research",
                    "training",
                    _pod_spec(8, H100, "fleetplane-training-high"),
                ),
                batch_job(
                    "backfill",
                    "analytics",
                    _pod_spec(8, A100, "fleetplane-batch", spot=True, restart="Never"),
                ),
            ]
        )
        self.log("scenario: the gate")
        self.refuse(
            "a pod without a workload type",
            pod(
                "unlabelled",
                "analytics",
                None,
                _pod_spec(1, A100, "fleetplane-notebook", spot=True),
                NOTEBOOK,
            ),
        )
        self.refuse(
            "a training run priced over the team's budget",
            pod(
                "month-long-sweep",
                "analytics",
                "training",
                _pod_spec(16, A100, "fleetplane-training", spot=True, deadline=30 * 86400),
                {labels.CHECKPOINT_LOCATION: "s3://analytics-checkpoints/sweep"},
            ),
        )
        idle = fleet.workload_types["notebook"].idle
        window = idle.window_seconds if idle else 60
        notebook_started = self._started("analytics", "eda-notebook") or time.time()
        scrape = fleet.gpu_operator.dcgm_scrape_interval_seconds
        # A scrape past the window: the stand-in's first sample of the notebook comes a moment
        # after it started, and a window one sample short is partial evidence (no warning).
        first_pass_at = notebook_started + window + scrape + 2
        pending_after = fleet.controller.preemption_pending_seconds
        self.log(f"scenario: waiting for an idle window ({window}s) of the notebook, then a pass")
        time.sleep(max(0.0, first_pass_at - time.time()))
        # The pretraining gang writes a checkpoint (as its trainer would report one): it now
        # has the least work to lose.
        self.cluster.kubectl(
            "annotate",
            "pods",
            "-n",
            "ml-research",
            "-l",
            "app=pretrain-ckpt",
            f"{labels.LAST_CHECKPOINT}={int(time.time())}",
            "--overwrite",
        )
        first_at = time.time()
        self.controller_pass()
        # The reclaim is due a grace after the warning and before the warning leaves the window.
        warned_at = self.pass_until("idle.warn", until=first_at + window, every=scrape) or first_at
        grace = idle.grace_seconds if idle else 30
        self.log(f"scenario: the notebook's grace ({grace}s), then the next pass")
        time.sleep(max(0.0, warned_at + grace + 2 - time.time()))
        self.wait(
            "the urgent evaluation placed",
            lambda: bool(self._started("ml-research", "urgent-eval")),
            30,
        )
        self.controller_pass()
        self.pass_until("idle.reclaim", until=warned_at + window - 2, every=scrape)
        self.log(
            f"scenario: done in {time.monotonic() - started:.0f}s (preemption after {pending_after}s pending)"
        )
        # After the account: a Karpenter pool grows for a gang and shrinks after it
        # (localfleet.scenario_karpenter); its failure fails `up`.
        return self.account(fleet) + play_karpenter_scene(
            self.cluster,
            fleet,
            gang=lambda name, members, spec: gang(
                name,
                "ml-research",
                TEAM_QUEUES["ml-research"],
                members,
                spec,
                {QUEUE_ANNOTATION: TEAM_QUEUES["ml-research"]},
            ),
            priority_class="fleetplane-training",
            log=self.log,
        )

    def _started(self, namespace: str, name: str) -> float | None:
        for p in self.pods(namespace):
            if p["metadata"]["name"] == name and p.get("status", {}).get("phase") == "Running":
                return _scheduled_at(p) or _created(p)
        return None

    def account(self, fleet: Any) -> str:
        now = time.time()
        queues = {
            q["metadata"]["name"]: q
            for q in self.cluster.get_json("queues.scheduling.volcano.sh")["items"]
        }
        spend = self.stack.spend(fleet)
        total_weight = sum(team.queue_weight for team in fleet.teams) or 1
        lines = [
            "",
            "=== scenario: the fleet at work ===",
            f"{'TEAM':10} {'GPUS HELD/QUOTA':16} {'SHARE':7} {'WAIT p50/p95':14} {'WAITING':8} SPEND",
        ]
        for team in fleet.teams:
            team_pods = [p for ns in team.effective_namespaces for p in self.pods(ns)]
            waits, waiting = queue_waits(team_pods, now)
            capability = queues.get(team.name, {}).get("spec", {}).get("capability", {}) or {}
            quota = capability.get(labels.GPU_RESOURCE, "0")
            spent = spend.get(team.name, {}).get("usd")
            money = f"${spent:,.2f}" if isinstance(spent, int | float) else "-"
            lines.append(
                f"{team.name:10} {f'{gpus_held(team_pods)}/{quota}':16} "
                f"{team.queue_weight / total_weight:>6.0%} "
                f"{f'{percentile(waits, 0.5):.0f}s/{percentile(waits, 0.95):.0f}s':14} "
                f"{waiting:<8} {money} of ${team.monthly_budget_usd:,.0f}"
            )
        lines += ["", "pending, and why:"]
        for p in self.pods():
            if p.get("spec", {}).get("nodeName") or p.get("status", {}).get("phase") != "Pending":
                continue
            lines.append(
                f"  {p['metadata']['namespace']}/{p['metadata']['name']}: {pending_reason(p)}"
            )
        lines += ["", "the gate refused:"]
        lines += [f"  {what}: {message}" for what, message in self.run_state.refused]
        lines += ["", "the controller decided:"]
        decisions = [d for d in self.run_state.decisions if d.event != "spend.publish"]
        lines += [f"  {d.event:14} {d.target}: {d.reason}" for d in decisions] or ["  (nothing)"]
        lines += self.notebook_account()
        passes = ", ".join("ok" if code == 0 else f"exit {code}" for code in self.run_state.passes)
        lines.append(f"controller passes: {passes}")
        for number, errors in enumerate(self.run_state.failures, 1):
            lines += [f"  pass {number}: {error}" for error in errors]
        return "\n".join(lines)


def _epoch(stamp: str) -> float | None:
    from datetime import datetime

    try:
        return datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return None


def pending_reason(pod_obj: dict[str, Any]) -> str:
    for condition in pod_obj.get("status", {}).get("conditions", []) or []:
        if condition.get("type") == "PodScheduled" and condition.get("status") == "False":
            return str(condition.get("message") or condition.get("reason") or "waiting")[:200]
    return "waiting for the scheduler"


def cleanup(cluster: LocalCluster, timeout: float = 60) -> None:
    """Remove what an earlier scenario submitted, so `up` can play it again."""
    selector = f"{SCENARIO_LABEL}=up"
    for kind in ("jobs.batch.volcano.sh", "jobs.batch", "deployments", "pods"):
        cluster.kubectl(
            "delete",
            kind,
            "-A",
            "-l",
            selector,
            "--wait=false",
            "--grace-period=0",
            "--force",
            check=False,
        )
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not cluster.get_json("pods", "-A", "-l", selector)["items"]:
            return
        cluster.kubectl(
            "delete", "pods", "-A", "-l", selector, "--grace-period=0", "--force", check=False
        )
        time.sleep(1)
