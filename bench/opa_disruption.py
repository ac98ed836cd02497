"""OPA's CPU for the disruption concern's batched decisions, by the shape of their input.

    python bench/opa_disruption.py [--pods 5000] [--rounds 3] [--batch 100]

Starts OPA as the gate runs it (token authentication and authorization, the local stack's
configuration and the packages' anchors loaded at start, the components' GC settings and
`opa run` flags: bench/fleet_setup.product_opa) and asks it, the controller's way
(`Opa.decide_each`, `act.disruption.BATCH` pods a request, the policy's `decisions` rule), for
every pod of a production-shaped fleet of running accelerator pods (training gangs of 8 under
Volcano Jobs with checkpoints of every age, notebooks, inference replicas; the controller's own
protection annotations on some, as after a pass), decoded as the controller decodes them
(`pod_from_api`) and judged by `controller.decide.disruption.facts`. Three inputs, one after
the other on the same OPA, each after a warm-up round:

- `whole`: each input's `pod` is the whole kept manifest (`Pod.manifest()`: metadata, spec,
  status), what the controller sent before;
- `slim`: the pod's metadata only (`{"metadata": Pod.metadata()}`), what it sends now;
- `with`: the slim inputs to a rule shaped as the policy's `decisions` (each key's answer a
  `decision with input as` that key's input) whose `decision` evaluates nothing;
- `floor`: the slim inputs to a rule that answers every key without evaluating anything: what
  OPA spends parsing the request, iterating and answering. `with` less `floor` is what the
  `with input` of each pod costs, `slim` less `with` the disruption rules' own evaluation.

Both bench rules are written into this OPA's copy of the policies only
(`fleetplane.decisions.bench_with`, `.bench_floor`).

Prints, per input: OPA's CPU seconds per round (from /proc of the OPA process) and per pod, the
request bytes per pod, the wall time, and the controller's CPU to build the inputs. Checks the
answers of `whole` and `slim` are equal for every pod, and the answers of the first
`RECORDED` pods equal the ones recorded in `opa_disruption_answers.json` (allow and reasons,
word for word: a rewrite of the rules for speed must answer as before; exit 1 otherwise). The
fleet is judged at a fixed instant (`--now`), so its answers are the same on every run;
`--record` writes them anew after a change that means to change them. Figures only: the
machine's load shows in them; nothing asserts timing.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson
from fleet_setup import product_opa

from controller.act.disruption import BATCH
from controller.act.opa import Decision, Opa
from controller.decide.disruption import PROTECTED_BY, PROTECTED_REASON, facts
from controller.observe.model import Pod, pod_from_api
from fleet import labels as keys
from fleet.config import load_stack_config
from fleet.opa import OPA_GC_ENV
from fleet.project import policies_dir, stack_file
from fleet.render import render_opa_data
from localfleet.servers import cpu_seconds

BENCH_POLICIES = {
    "bench_floor": """package fleetplane.decisions.bench_floor

# Every key answered, nothing evaluated: what OPA spends on the request itself.
decisions := {key: {"allow": false, "reasons": ["floor"]} | some key, _ in input.pods}
""",
    "bench_with": """package fleetplane.decisions.bench_with

# The policy's batching (each answer a decision under `with input`), nothing decided.
decision := {"allow": false, "reasons": ["floor"]}

decisions := {key: answer |
	some key, one in input.pods
	answer := decision with input as one
}
""",
}


NOW = 1795939200
"""The instant the fleet is judged at (2026-11-29T07:20:00Z): fixed, so the answers recorded
for it hold on every run."""
RECORDED = 240
"""Pods whose answers are recorded: whole blocks of 8 (a gang's members are in its block, so
their answers do not depend on how many pods follow)."""
ANSWERS = Path(__file__).with_name("opa_disruption_answers.json")


def stamp(at: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(at))


def raw_pod(i: int, now: float) -> dict[str, Any]:
    """Pod `i` of the fleet as the API server serves it (the fields the controller decodes)."""
    kind = ("training",) * 7 + ("notebook", "notebook", "inference")
    workload_type = kind[i % 10]
    namespace = ("ml-research", "analytics", "vision", "speech")[i % 4]
    labels = {keys.WORKLOAD_TYPE: workload_type, "app.kubernetes.io/part-of": namespace}
    annotations: dict[str, str] = {"kubectl.kubernetes.io/default-container": "main"}
    if workload_type == "training":
        job = f"train-{i // 8}"
        labels |= {"volcano.sh/job-name": job, "volcano.sh/task-spec": "worker"}
        annotations |= {
            "scheduling.k8s.io/group-name": f"{job}-pg",
            keys.CHECKPOINT_LOCATION: f"s3://checkpoints/{namespace}/{job}",
        }
        if i % 3:
            # ages from fresh to stale, the gang's oldest deciding
            annotations[keys.LAST_CHECKPOINT] = str(int(now - (i * 37) % 2400))
        owner = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": job}
    elif workload_type == "inference":
        labels |= {"app": "serve", "pod-template-hash": "5d8f7c9b4"}
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "serve-5d8f7c9b4"}
    else:
        labels |= {"statefulset.kubernetes.io/pod-name": f"nb-{i}"}
        owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": f"nb-{i}"}
    if i % 2:
        # protected by an earlier pass: the controller's own marks, as a pass leaves them
        annotations |= {
            "karpenter.sh/do-not-disrupt": "true",
            PROTECTED_BY: "controller",
            PROTECTED_REASON: "member of gang x (8 pods): its oldest checkpoint 1000s ago, "
            "older than 900s; a split gang loses all of its work",
        }
    gpus = "8" if workload_type == "training" else "1"
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"p-{i}",
            "namespace": namespace,
            "uid": f"{i:08x}-0000-4000-8000-{i:012x}",
            "resourceVersion": str(1000 + i),
            "creationTimestamp": stamp(now - 7200),
            "labels": labels,
            "annotations": annotations,
            "ownerReferences": [{**owner, "uid": f"o-{i // 8}", "controller": True}],
        },
        "spec": {
            "nodeName": f"gpu-{i // 8}",
            "priority": 1000,
            "priorityClassName": f"fleetplane-{workload_type}",
            "nodeSelector": {keys.POOL: "h100-on-demand"},
            "tolerations": [dict(keys.GPU_TAINT) | {"operator": "Exists"}],
            "containers": [
                {
                    "name": "main",
                    "image": "nvcr.io/nvidia/pytorch:24.05-py3",
                    "resources": {
                        "limits": {"nvidia.com/gpu": gpus, "cpu": "32", "memory": "256Gi"},
                        "requests": {"nvidia.com/gpu": gpus, "cpu": "16", "memory": "200Gi"},
                    },
                }
            ],
        },
        "status": {"phase": "Running", "startTime": stamp(now - (i * 13) % 9000)},
    }


def ask_all(opa: Opa, name: str, inputs: list[dict[str, Any]], batch: int) -> dict[int, Decision]:
    answers: dict[int, Decision] = {}
    for start in range(0, len(inputs), batch):
        found = opa.decide_each(
            name, {str(start + k): one for k, one in enumerate(inputs[start : start + batch])}
        )
        answers.update({int(key): answer for key, answer in found.items()})
    return answers


def measure(
    opa: Opa, pid: int, name: str, inputs: list[dict[str, Any]], args: argparse.Namespace
) -> tuple[dict[str, float], dict[int, Decision]]:
    answers = ask_all(opa, name, inputs, args.batch)  # warm-up
    cpu, wall = [], []
    for _ in range(args.rounds):
        before, started = cpu_seconds(pid), time.monotonic()
        ask_all(opa, name, inputs, args.batch)
        cpu.append(cpu_seconds(pid) - before)
        wall.append(time.monotonic() - started)
    sent = sum(
        len(orjson.dumps({"input": {"pods": {str(k): one}}})) for k, one in enumerate(inputs)
    )
    pods = len(inputs)
    return {
        "opa_cpu_s": min(cpu),
        "opa_cpu_s_max": max(cpu),
        "opa_us_per_pod": min(cpu) / pods * 1e6,
        "wall_s": min(wall),
        "bytes_per_pod": sent / pods,
    }, answers


def recorded_span(pods: int) -> int:
    return min(RECORDED, pods - pods % 8)


def as_recorded(answers: dict[int, Decision], upto: int) -> dict[str, dict[str, Any]]:
    return {
        str(k): {"allow": answers[k].allow, "reasons": list(answers[k].reasons)}
        for k in range(upto)
        if k in answers
    }


def recorded_differ(answers: dict[int, Decision], args: argparse.Namespace) -> list[str]:
    """The keys whose answer is not the recorded one (writes them instead under --record)."""
    upto = recorded_span(args.pods)
    found = as_recorded(answers, upto)
    if args.record:
        document = {"now": args.now, "answers": found}
        options = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
        ANSWERS.write_bytes(orjson.dumps(document, option=options) + b"\n")
        return []
    recorded = orjson.loads(ANSWERS.read_bytes())
    if recorded["now"] != args.now:
        return [f"recorded at now={recorded['now']}, judged at {args.now}"]
    expected = {k: v for k, v in recorded["answers"].items() if int(k) < upto}
    return sorted((k for k in expected.keys() | found if found.get(k) != expected.get(k)), key=int)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pods", type=int, default=5000)
    parser.add_argument("--rounds", type=int, default=3, help="measured rounds; the least CPU")
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--now", type=int, default=NOW, help="the instant judged at")
    parser.add_argument("--record", action="store_true", help=f"write {ANSWERS.name} anew")
    args = parser.parse_args(argv)

    now = float(args.now)
    started = time.process_time()
    pods: list[Pod] = [pod_from_api(raw_pod(i, now)) for i in range(args.pods)]
    decode_s = time.process_time() - started
    started = time.process_time()
    judged = facts(pods, now)
    slim_build_s = time.process_time() - started
    started = time.process_time()
    whole = [{**one, "pod": pod.manifest()} for pod, one in judged]
    manifest_s = time.process_time() - started
    slim = [one for _, one in judged]

    work = Path(tempfile.mkdtemp(prefix="fleetplane-opa-disruption-"))
    try:
        policies = work / "policies"
        shutil.copytree(policies_dir(), policies)
        for package, source in BENCH_POLICIES.items():
            (policies / "fleetplane" / "decisions" / package).mkdir()
            (policies / "fleetplane" / "decisions" / package / "bench.rego").write_text(source)
        config = render_opa_data(load_stack_config(stack_file("local")))
        server, token_file = product_opa(work, config)
        server.policies, server.env = policies, dict(OPA_GC_ENV)
        server.start()
        try:
            pid = server.pid()
            assert pid is not None
            comm = Path(f"/proc/{pid}/comm").read_text().strip()
            opa = Opa(server.url, token_file=str(token_file), timeout=60)
            figures: dict[str, dict[str, float]] = {}
            figures["whole"], whole_answers = measure(opa, pid, "disruption", whole, args)
            figures["slim"], slim_answers = measure(opa, pid, "disruption", slim, args)
            figures["with"], _ = measure(opa, pid, "bench_with", slim, args)
            figures["floor"], _ = measure(opa, pid, "bench_floor", slim, args)
        finally:
            server.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(
        f"{len(slim)} judged pods of {args.pods}, batches of {args.batch}, {args.rounds} "
        f"rounds (least CPU shown); OPA process {pid} ({comm})"
    )
    print(
        f"controller: decode {decode_s:.2f} CPU-s; facts with the slim input "
        f"{slim_build_s:.3f} CPU-s; whole manifests on top {manifest_s:.3f} CPU-s"
    )
    print(f"{'input':<6} {'OPA CPU-s':>10} {'(max)':>7} {'us/pod':>7} {'wall s':>7} {'B/pod':>6}")
    for name, row in figures.items():
        print(
            f"{name:<6} {row['opa_cpu_s']:>10.3f} {row['opa_cpu_s_max']:>7.3f} "
            f"{row['opa_us_per_pod']:>7.0f} {row['wall_s']:>7.2f} {row['bytes_per_pod']:>6.0f}"
        )
    allowed = sum(1 for answer in slim_answers.values() if answer.allow)
    print(f"answers: {len(slim_answers)} ({allowed} allow)")
    if slim_answers != whole_answers or len(slim_answers) != len(slim):
        differ = [k for k in range(len(slim)) if slim_answers.get(k) != whole_answers.get(k)]
        print(f"answers differ between whole and slim inputs: pods {differ[:20]}")
        return 1
    print("answers equal for every pod, whole and slim")
    unlike = recorded_differ(slim_answers, args)
    if unlike:
        print(f"answers differ from {ANSWERS.name}: pods {unlike[:20]}")
        return 1
    told = "recorded in" if args.record else "equal to"
    print(f"answers of the first {recorded_span(args.pods)} pods {told} {ANSWERS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
