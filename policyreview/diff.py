"""Which admission decisions a policy change flips, for a pull request.

    fleetplane policy diff --base origin/main [--corpus DIR]... [--data FILE]
                           [--spend FILE] [--approvals FILE] [--workloads FILE]
                           [--trace CSV|none] [--trace-limit N]
                           [--seed N] [--output report.md] [--fail-on-change]

Evaluates the policies of the base git ref (extracted with `git archive`) and those of the
working tree over the same corpus of AdmissionReviews, one batch `opa eval` per side (both
sides run at once), and prints a Markdown report of every decision that changed: counts by
kind of change, by team and by workload type, and a few examples of each kind with the
messages before and after.

The corpus is every AdmissionReview under each --corpus directory (default: the corpus shipped
in policyreview/corpus/reviews) plus requests generated from the Alibaba GPU trace (default:
the pod list shipped with the replay, or $FLEETPLANE_TRACE_DIR; `--trace none` to skip). The trace has no teams, types or images: the generator
assigns them from a seeded random stream (`--seed`, default 2023), so the same trace, seed and
configuration always give the same requests; see generate_from_trace for the mapping.

Both sides are evaluated with the same data (`--data`, default the corpus configuration
policyreview/corpus/config.json; `--spend` for month-to-date spend; `--approvals` for
data.fleetplane.approvals and `--workloads` for the controller's workload records, by default
the corpus's own when --data is not given) and the same clock.

Exit status: 0 when the report was produced (1 with --fail-on-change when a decision
changed), 2 when it could not run (bad ref, no opa, unreadable corpus).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import shutil
import subprocess
import tarfile
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fleet.project import find_project
from replay.trace import DEFAULT_POD_FILE, DEFAULT_TRACE_DIR, read_pod_rows

CORPUS_DIR = Path(__file__).resolve().parent / "corpus"
"""The default corpus, shipped with the package: the test case table rendered as AdmissionReviews
(`tests/policies/cases.py`; a test keeps the two in step) and the configuration they are judged
with."""
DEFAULT_DATA = CORPUS_DIR / "config.json"
DEFAULT_APPROVALS = CORPUS_DIR / "approvals.json"
"""The corpus's data.fleetplane.approvals: the Rego fixture's approval, expiring in 2100."""
DEFAULT_WORKLOADS = CORPUS_DIR / "workloads.json"
"""The corpus's data.fleetplane.workloads: the controller's records of workloads the corpus's
disruption budgets select (tests/policies/lifetime_cases.py `CORPUS_WORKLOADS`)."""
DEFAULT_CORPUS = CORPUS_DIR / "reviews"
DEFAULT_TRACE = DEFAULT_TRACE_DIR / DEFAULT_POD_FILE
POLICY_DIR = "policies"
EXAMPLES_PER_KIND = 3
WORKLOAD_TYPE = "fleetplane.dev/workload-type"

Json = dict[str, Any]


class PolicyDiffError(Exception):
    """The diff could not be computed (bad ref, missing tool, unreadable input)."""


# ---------------------------------------------------------------------------- corpus


@dataclass(frozen=True)
class Request:
    """One AdmissionReview of the corpus and where it came from."""

    name: str
    origin: str
    review: Json


def load_corpus(directories: Iterable[Path]) -> list[Request]:
    """AdmissionReviews from *.json files (one review, or a list) and *.jsonl files."""
    requests: list[Request] = []
    for directory in directories:
        if not directory.is_dir():
            raise PolicyDiffError(f"corpus directory {directory} does not exist")
        for path in sorted(directory.rglob("*")):
            if path.suffix not in (".json", ".jsonl") or not path.is_file():
                continue
            try:
                if path.suffix == ".jsonl":
                    documents = [json.loads(line) for line in path.read_text().splitlines() if line]
                else:
                    loaded = json.loads(path.read_text())
                    documents = loaded if isinstance(loaded, list) else [loaded]
            except json.JSONDecodeError as error:
                raise PolicyDiffError(f"{path}: not JSON ({error})") from error
            relative = path.relative_to(directory)
            for index, document in enumerate(documents):
                name = str(relative) if len(documents) == 1 else f"{relative}#{index}"
                requests.append(Request(name=name, origin=str(directory), review=document))
    return requests


def generate_from_trace(
    trace: Path, config: Json, *, seed: int, limit: int | None = None
) -> list[Request]:
    """AdmissionReviews for the pods of the Alibaba GPU trace.

    Trace facts used: num_gpu (devices per pod), gpu_milli (a share of one GPU marks a
    GPU-sharing pod), qos, creation/scheduled/deletion times (runtime). Assumptions, drawn
    from random.Random(seed) in row order, every team equally likely:

    - team: any team of the configuration (its first namespace; 1 in 100 pods in `default`);
    - type and kind: no GPU -> a CPU Pod; a share of one GPU -> notebook Pod (idle timeout
      1, 2, 4 or 8 h); LS -> inference Deployment (1-4 replicas); BE -> batch Job on spot
      (deadline from the trace runtime); otherwise training, a Volcano Job (1-4 workers, in
      the team's queue) from 4 GPUs per pod up, else a Job, half on spot (4 in 5 of those
      declare a checkpoint); every accelerator template of a team namespace but a Volcano
      Job's names the team's queue (`scheduling.volcano.sh/queue-name`);
    - model: one of the team's allowed GPU models (1 in 30 select none);
    - image: from the first allowed registry (1 in 30 from Docker Hub);
    - priority class: the type's first (1 in 50 another type's).
    """
    rng = random.Random(seed)
    teams = sorted(config.get("teams", {}))
    models = config.get("models", {})
    types = config.get("workload_types", {})
    registry = (config.get("registries") or ["registry.example.com/"])[0]
    registry = registry if registry.endswith("/") else registry + "/"
    if not teams:
        return []
    requests: list[Request] = []
    for _, row in read_pod_rows(trace):
        if limit is not None and len(requests) >= limit:
            break
        team = rng.choice(teams)
        team_config = config["teams"][team]
        namespace = (team_config.get("namespaces") or [team])[0]
        if rng.random() < 0.01:
            namespace = "default"
        gpus = int(row["num_gpu"])
        share = int(row["gpu_milli"] or 0)
        runtime = max(60, int(row["deletion_time"] or 0) - int(row["scheduled_time"] or 0))
        image = (
            f"docker.io/library/python:3.{rng.randint(9, 12)}"
            if rng.random() < 1 / 30
            else f"{registry}ml/{row['name']}:1"
        )
        if gpus == 0:
            workload_type = None
        elif gpus == 1 and share < 1000:
            workload_type = "notebook"
        elif row["qos"] == "LS" and gpus == 1:
            workload_type = "inference"
        elif row["qos"] == "BE":
            workload_type = "batch"
        else:
            workload_type = "training"
        gpu_models = [
            m
            for m in team_config.get("allowed_models", [])
            if models.get(m, {}).get("resource") == "nvidia.com/gpu"
        ]
        template = _template(
            rng, row, gpus, image, workload_type, gpu_models, models, types, runtime
        )
        queue = team_config.get("queue") or team
        obj = _wrap(rng, row["name"], namespace, workload_type, gpus, template, runtime, queue)
        review = _review(row["name"], namespace, obj)
        requests.append(Request(name=row["name"], origin=str(trace), review=review))
    return requests


def _template(
    rng: random.Random,
    row: dict[str, str],
    gpus: int,
    image: str,
    workload_type: str | None,
    gpu_models: list[str],
    models: Json,
    types: Json,
    runtime: int,
) -> Json:
    resources: Json = {
        "requests": {"cpu": f"{row['cpu_milli']}m", "memory": f"{row['memory_mib']}Mi"},
        "limits": {"memory": f"{row['memory_mib']}Mi"},
    }
    metadata: Json = {"labels": {"app": row["name"]}, "annotations": {}}
    spec: Json = {"containers": [{"name": "main", "image": image, "resources": resources}]}
    if workload_type is None:
        return {"metadata": metadata, "spec": spec}
    resources["limits"]["nvidia.com/gpu"] = str(gpus)
    metadata["labels"][WORKLOAD_TYPE] = workload_type
    classes = types.get(workload_type, {}).get("priority_classes") or [
        f"fleetplane-{workload_type}"
    ]
    others = [
        c
        for t, cfg in sorted(types.items())
        if t != workload_type
        for c in cfg.get("priority_classes", [])
    ]
    spec["priorityClassName"] = rng.choice(others) if others and rng.random() < 0.02 else classes[0]
    selector: Json = {}
    if gpu_models and rng.random() >= 1 / 30:
        model = models[rng.choice(gpu_models)]
        selector[model["node_label"]] = model["label_value"]
    on_spot = workload_type == "batch" or (workload_type == "training" and rng.random() < 0.5)
    if on_spot:
        selector["fleetplane.dev/capacity-type"] = "spot"
        spec["tolerations"] = [
            {
                "key": "fleetplane.dev/capacity-type",
                "operator": "Equal",
                "value": "spot",
                "effect": "NoSchedule",
            }
        ]
        if workload_type == "training" and rng.random() < 0.8:
            metadata["annotations"]["fleetplane.dev/checkpoint-location"] = (
                f"s3://checkpoints/{row['name']}"
            )
    if workload_type == "notebook":
        timeout = rng.choice([3600, 7200, 14400, 28800])
        metadata["annotations"]["fleetplane.dev/idle-timeout-seconds"] = str(timeout)
    if workload_type in ("batch", "training"):
        spec["activeDeadlineSeconds"] = runtime
    if selector:
        spec["nodeSelector"] = selector
    return {"metadata": metadata, "spec": spec}


def _wrap(
    rng: random.Random,
    name: str,
    namespace: str,
    workload_type: str | None,
    gpus: int,
    template: Json,
    runtime: int,
    queue: str,
) -> Json:
    meta = {"name": name, "namespace": namespace}
    volcano_job = workload_type == "training" and gpus >= 4
    if workload_type is not None and namespace != "default" and not volcano_job:
        # Every accelerator pod of a team names its team's queue (the gate's queue rule); a
        # Volcano Job's pods are grouped by Volcano in the job's spec.queue instead.
        template["metadata"]["annotations"][QUEUE_ANNOTATION] = queue
    if workload_type == "inference":
        spec = {"replicas": rng.randint(1, 4), "selector": {"matchLabels": {"app": name}}}
        spec["template"] = template
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": spec}
    if workload_type == "batch" or (workload_type == "training" and gpus < 4):
        template["spec"]["restartPolicy"] = "Never"
        job = {"backoffLimit": 2, "template": template}
        return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": job}
    if workload_type == "training":
        template["spec"]["restartPolicy"] = "Never"
        tasks = [{"name": "worker", "replicas": rng.randint(1, 4), "template": template}]
        return {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": meta,
            "spec": {"schedulerName": "volcano", "queue": queue, "minAvailable": 1, "tasks": tasks},
        }
    pod_meta = {**template["metadata"], **meta}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": pod_meta, "spec": template["spec"]}


QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"

GVK = {
    "v1/Pod": ("", "v1", "Pod", "pods"),
    "apps/v1/Deployment": ("apps", "v1", "Deployment", "deployments"),
    "batch/v1/Job": ("batch", "v1", "Job", "jobs"),
    "batch.volcano.sh/v1alpha1/Job": ("batch.volcano.sh", "v1alpha1", "Job", "jobs"),
}


def _review(name: str, namespace: str, obj: Json) -> Json:
    group, version, kind, resource = GVK[f"{obj['apiVersion']}/{obj['kind']}"]
    return {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": name,
            "kind": {"group": group, "version": version, "kind": kind},
            "resource": {"group": group, "version": version, "resource": resource},
            "name": name,
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "trace-replay"},
            "object": obj,
        },
    }


# ------------------------------------------------------------------------ evaluation


@dataclass(frozen=True)
class Decision:
    """An admission response reduced to what a reviewer compares."""

    allowed: bool | None  # None: the policies gave no answer
    messages: tuple[str, ...]
    warnings: tuple[str, ...]

    @staticmethod
    def of(response: Json | None) -> Decision:
        if not isinstance(response, dict):
            return Decision(None, (), ())
        message = response.get("status", {}).get("message", "")
        return Decision(
            allowed=bool(response.get("allowed")),
            messages=tuple(line for line in message.split("\n") if line),
            warnings=tuple(response.get("warnings", [])),
        )

    def label(self) -> str:
        return {True: "allowed", False: "denied", None: "no decision"}[self.allowed]


QUERY = (
    "[[i, r] | some i, review in input.reviews; "
    "r := data.system.main.response with input as review with time.now_ns as {now_ns}]"
)


def evaluate(
    opa: Path, policies: Path, data_dir: Path, reviews: list[Json], now_ns: int
) -> list[Decision]:
    """One batch `opa eval` of data.system.main over every review."""
    decisions = [Decision(None, (), ())] * len(reviews)
    if not any(policies.rglob("*.rego")):
        return decisions
    with tempfile.TemporaryDirectory(prefix="policydiff-input-") as work:
        input_path = Path(work) / "input.json"
        input_path.write_text(json.dumps({"reviews": reviews}))
        command = [
            str(opa),
            "eval",
            "--format=json",
            "--ignore=*_test.rego",
            "--ignore=.*",
            "--data",
            str(policies),
            "--data",
            str(data_dir),
            "--input",
            str(input_path),
            QUERY.format(now_ns=now_ns),
        ]
        result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        detail = (result.stderr or result.stdout)[-4000:]
        raise PolicyDiffError(f"opa eval failed for {policies}:\n{detail}")
    output = json.loads(result.stdout)
    values = output.get("result", [{}])[0].get("expressions", [{}])[0].get("value", [])
    for index, response in values:
        decisions[index] = Decision.of(response)
    return decisions


def extract(repo: Path, ref: str, destination: Path) -> bool:
    """Write the policies of a git ref under destination; False when the ref has none."""
    verify = _git(repo, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
    if verify.returncode != 0:
        raise PolicyDiffError(f"{ref!r} is not a commit of {repo}")
    tree = _git(repo, "ls-tree", "-d", "--name-only", ref, "--", POLICY_DIR)
    if not tree.stdout.strip():
        return False
    archive = subprocess.run(
        ["git", "-C", str(repo), "archive", "--format=tar", ref, "--", POLICY_DIR],
        capture_output=True,
    )
    if archive.returncode != 0:
        raise PolicyDiffError(f"git archive {ref} failed: {archive.stderr.decode()[-2000:]}")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(destination, filter="data")
    return True


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True)


def write_data(
    directory: Path,
    config: Json,
    spend: Json | None,
    approvals: Json | None = None,
    workloads: Json | None = None,
) -> None:
    """OPA loads a data file at the path of its directories."""
    documents = {"config": config, "spend": spend, "approvals": approvals, "workloads": workloads}
    for name, document in documents.items():
        if document is None:
            continue
        (directory / "fleetplane" / name).mkdir(parents=True)
        (directory / "fleetplane" / name / "data.json").write_text(json.dumps(document))


# ---------------------------------------------------------------------------- report


@dataclass(frozen=True)
class Change:
    request: Request
    before: Decision
    after: Decision
    team: str
    workload_type: str

    @property
    def kind(self) -> str:
        if self.before.allowed != self.after.allowed:
            return f"{self.before.label()} → {self.after.label()}"
        if self.before.messages != self.after.messages:
            return "denied, messages changed"
        return "allowed, warnings changed"


def describe(review: Json, namespaces: Json) -> tuple[str, str, str]:
    """(team, workload type, kind) of a review, for grouping."""
    request = review.get("request") if isinstance(review, dict) else None
    if not isinstance(request, dict):
        return "—", "—", "—"
    namespace = request.get("namespace") or ""
    team = namespaces.get(namespace, f"({namespace or 'no namespace'})")
    obj = request.get("object") or {}
    kind = (request.get("kind") or {}).get("kind", "—")
    if (request.get("kind") or {}).get("group") == "batch.volcano.sh":
        kind = "Volcano Job"
    workload_type = "—"
    for template in _templates(obj):
        labels = (template.get("metadata") or {}).get("labels") or {}
        if isinstance(labels, dict) and labels.get(WORKLOAD_TYPE):
            workload_type = str(labels[WORKLOAD_TYPE])
            break
    return str(team), workload_type, str(kind)


def _templates(obj: Any) -> Iterator[Json]:
    if not isinstance(obj, dict):
        return
    spec = obj.get("spec") or {}
    if not isinstance(spec, dict):
        return
    if "containers" in spec:
        yield obj
    if isinstance(spec.get("template"), dict):
        yield spec["template"]
    job = (spec.get("jobTemplate") or {}).get("spec") or {}
    if isinstance(job, dict) and isinstance(job.get("template"), dict):
        yield job["template"]
    for task in spec.get("tasks") or []:
        if isinstance(task, dict) and isinstance(task.get("template"), dict):
            yield task["template"]


def report(
    base: str,
    requests: list[Request],
    before: list[Decision],
    after: list[Decision],
    namespaces: Json,
    notes: list[str],
) -> tuple[str, list[Change]]:
    changes: list[Change] = []
    for request, old, new in zip(requests, before, after, strict=True):
        if old != new:
            team, workload_type, _ = describe(request.review, namespaces)
            changes.append(Change(request, old, new, team, workload_type))
    origins = Counter(r.origin for r in requests)
    lines = [
        f"# Policy diff: `{base}` → working tree",
        "",
        f"{len(requests)} admission requests evaluated on both sides; "
        f"**{len(changes)} decisions changed**, {len(requests) - len(changes)} unchanged.",
        "",
    ]
    lines += [f"- {count} from `{origin}`" for origin, count in sorted(origins.items())]
    lines += [f"- {note}" for note in notes]
    for side, decisions in (("base", before), ("working tree", after)):
        tally = Counter(d.label() for d in decisions)
        summary = ", ".join(f"{n} {label}" for label, n in sorted(tally.items()))
        lines.append(f"- {side}: {summary}")
    lines.append("")
    if not changes:
        lines.append("No admission decision changed.")
        return "\n".join(lines) + "\n", changes
    by_kind = Counter(c.kind for c in changes)
    lines += ["## Changes by kind", "", "| change | requests |", "| --- | ---: |"]
    lines += [f"| {kind} | {count} |" for kind, count in sorted(by_kind.items())]
    kinds = sorted(by_kind)
    lines += ["", "## Changes by team and workload type", ""]
    lines.append("| team | type | " + " | ".join(kinds) + " | total |")
    lines.append("| --- | --- | " + " | ".join("---:" for _ in kinds) + " | ---: |")
    groups = Counter((c.team, c.workload_type, c.kind) for c in changes)
    for team, workload_type in sorted({(c.team, c.workload_type) for c in changes}):
        counts = [groups[(team, workload_type, kind)] for kind in kinds]
        cells = " | ".join(str(n) for n in counts)
        lines.append(f"| {team} | {workload_type} | {cells} | {sum(counts)} |")
    lines += ["", "## Examples", ""]
    for kind in kinds:
        examples = [c for c in changes if c.kind == kind]
        lines += [f"### {kind} ({len(examples)})", ""]
        for change in examples[:EXAMPLES_PER_KIND]:
            lines += _example(change)
    lines += ["## Every changed request", "", "<details><summary>list</summary>", ""]
    lines += ["| request | team | type | change |", "| --- | --- | --- | --- |"]
    lines += [f"| `{c.request.name}` | {c.team} | {c.workload_type} | {c.kind} |" for c in changes]
    lines += ["", "</details>", ""]
    return "\n".join(lines), changes


def _example(change: Change) -> list[str]:
    lines = [f"**`{change.request.name}`** (team {change.team}, type {change.workload_type})", ""]
    for side, decision in (("before", change.before), ("after", change.after)):
        lines.append(f"- {side}: {decision.label()}")
        lines += [f"  - `{m}`" for m in decision.messages]
        lines += [f"  - warning: `{w}`" for w in decision.warnings]
    lines.append("")
    return lines


# ------------------------------------------------------------------------------ main


def run(args: argparse.Namespace) -> tuple[str, list[Change]]:
    from localfleet.binaries import MissingToolError, find_binary

    try:
        opa = find_binary("opa", args.opa)
    except MissingToolError as error:
        raise PolicyDiffError(str(error)) from None
    repo = Path(args.repo).resolve() if args.repo else find_project()
    if repo is None:
        raise PolicyDiffError(
            "not inside a fleetplane project (a git work tree with Pulumi.yaml and policies/): "
            "run it there, or pass --repo"
        )
    try:
        config = json.loads(Path(args.data).read_text())
        spend = json.loads(Path(args.spend).read_text()) if args.spend else None
        approvals_file = getattr(args, "approvals", None)
        approvals = json.loads(Path(approvals_file).read_text()) if approvals_file else None
        workloads_file = getattr(args, "workloads", None)
        workloads = json.loads(Path(workloads_file).read_text()) if workloads_file else None
    except (OSError, json.JSONDecodeError) as error:
        raise PolicyDiffError(f"cannot read data: {error}") from error
    if isinstance(config, dict) and "fleetplane" in config:
        spend = config["fleetplane"].get("spend", spend)
        approvals = config["fleetplane"].get("approvals", approvals)
        workloads = config["fleetplane"].get("workloads", workloads)
        config = config["fleetplane"].get("config", {})
    notes = [
        f"data: `{args.data}`"
        + (f", spend: `{args.spend}`" if args.spend else "")
        + (f", approvals: `{approvals_file}`" if approvals_file else "")
        + (f", workloads: `{workloads_file}`" if workloads_file else "")
    ]
    corpus_dirs = [Path(c) for c in args.corpus] if args.corpus else [DEFAULT_CORPUS]
    requests = load_corpus(corpus_dirs)
    if args.trace != "none":
        trace = Path(args.trace)
        if trace.exists():
            generated = generate_from_trace(trace, config, seed=args.seed, limit=args.trace_limit)
            requests += generated
            notes.append(f"trace mapping: seed {args.seed} (see policyreview/diff.py)")
        elif args.trace != str(DEFAULT_TRACE):
            raise PolicyDiffError(f"trace {trace} does not exist")
        else:
            notes.append(f"trace `{trace}` not found; fixtures only")
    if not requests:
        raise PolicyDiffError("the corpus is empty")
    reviews = [r.review for r in requests]
    now_ns = time.time_ns()
    with tempfile.TemporaryDirectory(prefix="policydiff-") as work:
        workdir = Path(work)
        base_dir = workdir / "base"
        base_dir.mkdir()
        if not extract(repo, args.base, base_dir):
            notes.append(
                f"`{args.base}` has no {POLICY_DIR}/ directory: every base decision is empty"
            )
        head_dir = workdir / "head"
        shutil.copytree(
            repo / POLICY_DIR,
            head_dir / POLICY_DIR,
            ignore=shutil.ignore_patterns("*_test.rego", ".*"),
        )
        data_dir = workdir / "data"
        write_data(data_dir, config, spend, approvals, workloads)
        with ThreadPoolExecutor(max_workers=2) as pool:
            before_job = pool.submit(
                evaluate, opa, base_dir / POLICY_DIR, data_dir, reviews, now_ns
            )
            after_job = pool.submit(evaluate, opa, head_dir / POLICY_DIR, data_dir, reviews, now_ns)
            before, after = before_job.result(), after_job.result()
    return report(args.base, requests, before, after, config.get("namespaces", {}), notes)
