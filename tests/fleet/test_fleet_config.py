"""Validation of the fleet configuration: every bad input names its path and reason."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.policy_gate import webhook_rules
from fleet.config import (
    BUILTIN_OPERATORS,
    BUILTIN_WORKLOAD_TYPES,
    ConfigError,
    FleetConfig,
    load_stack_config,
    parse_fleet,
)
from fleet.render import render_approvals, render_opa_data
from tests.commands import fleetplane
from tests.components.component_testkit import REPO_ROOT, minimal_raw_fleet

Edit = Callable[[dict[str, Any]], None]


def pool(raw: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for c in raw["clusters"] for p in c["pools"] if p["name"] == name)


def team(raw: dict[str, Any], name: str) -> dict[str, Any]:
    return next(t for t in raw["teams"] if t["name"] == name)


def problems_of(edit: Edit) -> list[str]:
    raw = copy.deepcopy(minimal_raw_fleet())
    edit(raw)
    with pytest.raises(ConfigError) as caught:
        parse_fleet(raw)
    return [str(p) for p in caught.value.problems]


def test_minimal_fleet_is_valid() -> None:
    fleet = parse_fleet(minimal_raw_fleet())
    assert [p.name for p in fleet.pools] == ["h100", "h100-spot", "tpu"]
    assert fleet.pools[2].hosts_per_slice == 2


APPROVAL = {"id": "APR-1", "team": "research", "max_accelerators": 64, "expires_at": 1830297599}


def test_approvals_render_as_their_own_document() -> None:
    raw = copy.deepcopy(minimal_raw_fleet())
    raw["approvals"] = [
        APPROVAL,
        {**APPROVAL, "id": "APR-2", "expires_at": "2027-12-31T23:59:59Z"},
        {**APPROVAL, "id": "APR-3", "expires_at": "2027-12-31T23:59:59"},  # UTC when unsaid
    ]
    fleet = parse_fleet(raw)
    # unbound: no uid at all (the controller's binding file is merged in at OPA's start)
    expected = {"team": "research", "max_accelerators": 64, "expires_at": 1830297599}
    assert render_approvals(fleet) == {"APR-1": expected, "APR-2": expected, "APR-3": expected}
    assert "approved_ids" not in render_opa_data(fleet)["approval"]


def test_platform_and_system_namespaces_follow_the_configuration() -> None:
    raw = copy.deepcopy(minimal_raw_fleet())
    raw.update(system_namespace="platform", admin_groups=["ops@acme.example"])
    raw["volcano"] = {**raw.get("volcano", {}), "namespace": "volcano"}
    data = render_opa_data(parse_fleet(raw))
    assert data["system_namespaces"] == [
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "platform",
        "gpu-operator",
        "volcano",
        "monitoring",
        # the built-in operators' (fleet/config/operators.py)
        "kubeflow-system",
        "ray-system",
        "jobset-system",
        "lws-system",
    ]
    platform = data["platform"]
    assert platform["controller_service_account"] == (
        "system:serviceaccount:platform:fleetplane-controller"
    )
    assert "system:serviceaccount:volcano:volcano-controllers" in platform["workload_controllers"]
    assert platform["admin_groups"] == ["ops@acme.example"]
    assert {wt["pod_security"] for wt in data["workload_types"].values()} == {"baseline"}


def test_operators_are_configured_without_code() -> None:
    """A platform team adds its own operator, moves a built-in one and turns one off: the gate
    is sent the new kinds, trusts the new identities, and judges nothing in their namespaces."""
    raw = copy.deepcopy(minimal_raw_fleet())
    raw["operators"] = {
        "argo": {
            "service_accounts": ["argo/argo-workflow-controller"],
            "kinds": [
                {"group": "argoproj.io", "versions": ["v1alpha1"], "resources": ["workflows"]}
            ],
        },
        "kuberay": {
            "service_accounts": ["kuberay/kuberay-operator"],
            "kinds": [{"group": "ray.io", "versions": ["v1"], "resources": ["rayclusters"]}],
        },
        "leaderworkerset": {**BUILTIN_OPERATORS["leaderworkerset"], "enabled": False},
    }
    fleet = parse_fleet(raw)
    data = render_opa_data(fleet)
    trusted = data["platform"]["workload_controllers"]
    assert "system:serviceaccount:argo:argo-workflow-controller" in trusted
    assert "system:serviceaccount:kuberay:kuberay-operator" in trusted
    assert "system:serviceaccount:ray-system:kuberay-operator" not in trusted
    assert "system:serviceaccount:lws-system:lws-controller-manager" not in trusted
    assert "system:serviceaccount:jobset-system:jobset-controller-manager" in trusted
    assert {"argo", "kuberay"} <= set(data["system_namespaces"])
    assert "lws-system" not in data["system_namespaces"]
    rules = {
        (g, r)
        for rule in webhook_rules(fleet)
        for g in rule["apiGroups"]
        for r in rule["resources"]
    }
    assert ("argoproj.io", "workflows") in rules
    assert ("ray.io", "rayclusters") in rules and ("ray.io", "rayjobs") not in rules
    assert not any(g == "leaderworkerset.x-k8s.io" for g, _ in rules)
    assert ("jobset.x-k8s.io", "jobsets") in rules


def test_an_operator_names_its_service_accounts_and_kinds() -> None:
    raw = copy.deepcopy(minimal_raw_fleet())
    raw["operators"] = {"mine": {"service_accounts": ["no-namespace"], "kinds": []}}
    with pytest.raises(ConfigError) as caught:
        parse_fleet(raw)
    assert "operators.mine.service_accounts" in str(caught.value)
    assert "operators.mine.kinds" in str(caught.value)


# (id, edit, expected "path: reason" fragment)
BAD_INPUTS: list[tuple[str, Edit, str]] = [
    (
        "unknown model in a pool",
        lambda r: pool(r, "h100").update(model="b300"),
        "clusters[gke].pools[h100].model: unknown accelerator model 'b300'",
    ),
    (
        "unknown model in models",
        lambda r: r["models"].update({"x100": {"price_per_hour_usd": {"on-demand": 1, "spot": 1}}}),
        "models[x100]: unknown accelerator model 'x100'",
    ),
    (
        "pool model without a price",
        lambda r: r["models"].pop("tpu-v5e"),
        "clusters[gke].pools[tpu].model: model 'tpu-v5e' has no entry in models (prices)",
    ),
    (
        "team quota above what its pools can hold",
        lambda r: team(r, "research")["quota"].update({"nvidia.com/gpu": 49}),
        "teams[research].quota[nvidia.com/gpu]: quota 49 exceeds the 48 nvidia.com/gpu "
        "the team's pools can ever hold (h100 2x8, h100-spot 4x8)",
    ),
    (
        "quota counts only the pools a team may use",
        lambda r: (
            pool(r, "h100-spot").update(teams=["research"]),
            team(r, "serving")["quota"].update({"nvidia.com/gpu": 24}),
        ),
        "teams[serving].quota[nvidia.com/gpu]: quota 24 exceeds the 16 nvidia.com/gpu",
    ),
    (
        "TPU quota above the slices",
        lambda r: team(r, "research")["quota"].update({"google.com/tpu": 9}),
        "teams[research].quota[google.com/tpu]: quota 9 exceeds the 8 google.com/tpu",
    ),
    (
        "spot-only pools for a team with budget-exempt inference",
        lambda r: pool(r, "h100").update(teams=["research"]),
        "teams[serving].budget_exempt_types: budget-exempt type 'inference' runs on on-demand "
        "capacity only, but every pool team 'serving' can use is spot (pools: h100-spot)",
    ),
    (
        "TPU topology with the wrong number of dimensions",
        lambda r: pool(r, "tpu").update(tpu_topology="2x2x2"),
        "clusters[gke].pools[tpu].tpu_topology: '2x2x2' is not a tpu-v5e topology (expected NxN)",
    ),
    (
        "TPU pool without a topology",
        lambda r: pool(r, "tpu").pop("tpu_topology"),
        "clusters[gke].pools[tpu].tpu_topology: required for TPU model tpu-v5e",
    ),
    (
        "machine type of another model",
        lambda r: pool(r, "h100").update(machine_type="a2-highgpu-8g"),
        "clusters[gke].pools[h100].machine_type: 'a2-highgpu-8g' carries a100-40gb, not h100-80gb",
    ),
    (
        "machine type of another cloud",
        lambda r: pool(r, "h100").update(machine_type="p5.48xlarge"),
        "clusters[gke].pools[h100].machine_type: 'p5.48xlarge' is a machine type of aws, "
        "but cluster 'gke' is on gcp",
    ),
    (
        "unknown machine type without an accelerator count",
        lambda r: pool(r, "h100").update(machine_type="a9-futuregpu-8g"),
        "clusters[gke].pools[h100].machine_type: unknown machine type 'a9-futuregpu-8g': "
        "set accelerators_per_node",
    ),
    (
        "MIG profile the model does not have",
        lambda r: pool(r, "h100").update(mig_profile="1g.5gb"),
        "clusters[gke].pools[h100].mig_profile: h100-80gb does not support MIG profile '1g.5gb'",
    ),
    (
        "pool label in a domain the platform owns",
        lambda r: pool(r, "h100").update(labels={"fleetplane.dev/pool": "other", "team": "x"}),
        "clusters[gke].pools[h100].labels[fleetplane.dev/pool]: fleetplane.dev labels are set "
        "by the platform or the cloud",
    ),
    (
        "duplicate pool names",
        lambda r: r["clusters"][0]["pools"].append(dict(pool(r, "h100"))),
        "pools[h100]: duplicate pool name 'h100'",
    ),
    (
        "duplicate team names",
        lambda r: r["teams"].append({**team(r, "serving"), "namespaces": ["serving-2"]}),
        "teams[serving]: duplicate team name 'serving'",
    ),
    (
        "namespace of two teams",
        lambda r: team(r, "serving").update(namespaces=["research"]),
        "teams[serving].namespaces: namespace 'research' already belongs to team 'research'",
    ),
    (
        "duplicate cluster names",
        lambda r: r["clusters"].append({"name": "gke", "provider": "local"}),
        "clusters[gke]: duplicate cluster name 'gke'",
    ),
    (
        "guarantee above quota",
        lambda r: team(r, "serving").update(guaranteed={"nvidia.com/gpu": 9}),
        "teams[serving].guaranteed[nvidia.com/gpu]: guarantee 9 exceeds the team's quota 8",
    ),
    (
        "unknown accelerator resource",
        lambda r: team(r, "serving")["quota"].update({"amd.com/gpu": 1}),
        "teams[serving].quota[amd.com/gpu]: unknown accelerator resource 'amd.com/gpu'",
    ),
    (
        "budget exemption for a type that is not exempt",
        lambda r: team(r, "serving").update(budget_exempt_types=["batch"]),
        "teams[serving].budget_exempt_types: workload type 'batch' is not budget_exempt",
    ),
    (
        "period that does not divide an hour",
        lambda r: r.update(controller={"period_seconds": 420}),
        "controller.period_seconds: 420 is not a whole number of minutes dividing an hour",
    ),
    (
        "OPA elsewhere without its URL",
        lambda r: r.update(opa={"deploy": False}),
        "controller.opa_url: required when opa.deploy is false",
    ),
    (
        "EKS cluster without its node role",
        lambda r: r["clusters"].append({"name": "eks", "provider": "aws", "region": "us-west-2"}),
        "clusters[eks].node_role_arn: required for provider aws",
    ),
    # Structural problems, reported by the model with the same paths.
    (
        "capacity type not spot or on-demand",
        lambda r: pool(r, "h100").update(capacity_type="preemptible"),
        "clusters[gke].pools[h100].capacity_type: Input should be 'on-demand' or 'spot'",
    ),
    (
        "max_unavailable neither a count nor a percentage",
        lambda r: pool(r, "h100").update(max_unavailable="ten"),
        'clusters[gke].pools[h100].max_unavailable: must be a number of nodes (1 or more) or a percentage such as "10%"',
    ),
    (
        "zero max_unavailable",
        lambda r: pool(r, "h100").update(max_unavailable=0),
        "clusters[gke].pools[h100].max_unavailable: must be a number of nodes",
    ),
    (
        "misspelt key",
        lambda r: pool(r, "h100").update(max_node=3),
        "clusters[gke].pools[h100].max_node: Extra inputs are not permitted",
    ),
    (
        "negative budget",
        lambda r: team(r, "research").update(monthly_budget_usd=-1),
        "teams[research].monthly_budget_usd: Input should be greater than or equal to 0",
    ),
    (
        "name that is not a DNS label",
        lambda r: team(r, "research").update(name="Research_Team"),
        "teams[Research_Team].name: String should match pattern",
    ),
    (
        "workload type override of a built-in",
        lambda r: r.update(workload_types={"training": {"capacity": "sometimes"}}),
        "workload_types.training.capacity: Input should be 'any', 'spot' or 'on-demand'",
    ),
    (
        "controller image by tag",
        lambda r: r["controller"].update(
            image="us-docker.pkg.dev/acme/fleetplane/controller:0.1.0"
        ),
        "controller.image: 'us-docker.pkg.dev/acme/fleetplane/controller:0.1.0' does not name an image by digest",
    ),
    (
        "controller image missing for a CronJob that runs",
        lambda r: r["controller"].pop("image"),
        "controller.image: required for a CronJob that runs",
    ),
    (
        "OPA image missing with deploy",
        lambda r: r["opa"].pop("image"),
        "opa.image: required with deploy: true",
    ),
    (
        "approval for an unknown team",
        lambda r: r.update(approvals=[{**APPROVAL, "team": "nobody"}]),
        "approvals[APR-1].team: unknown team 'nobody'",
    ),
    (
        "approval below the threshold",
        lambda r: r.update(approvals=[{**APPROVAL, "max_accelerators": 8}]),
        "approvals[APR-1].max_accelerators: 8 needs no approval",
    ),
    (
        "approval granted twice",
        lambda r: r.update(approvals=[APPROVAL, APPROVAL]),
        "approvals: approval id 'APR-1' is granted more than once",
    ),
    (
        "approved ids are no longer a list",
        lambda r: r.update(approval={"approved_ids": ["APR-1"]}),
        "approval.approved_ids",
    ),
    (
        "unknown pod security level",
        lambda r: r.update(workload_types={"training": {"pod_security": "privileged"}}),
        "workload_types.training.pod_security",
    ),
    (
        "a team in a monitoring namespace",
        lambda r: team(r, "research").update(namespaces=["monitoring"]),
        "namespace 'monitoring' is reserved for the platform",
    ),
    (
        "a priority class that lets kube-scheduler preempt",
        lambda r: r.update(
            workload_types={
                "training": {
                    "priority_classes": [
                        {"name": "t", "value": 1, "preemption_policy": "PreemptLowerPriority"}
                    ]
                }
            }
        ),
        "workload_types.training.priority_classes[t].preemption_policy: must be Never: the "
        "controller is the one preemptor",
    ),
    (
        "Volcano actions that evict",
        lambda r: r.update(volcano={"actions": ["enqueue", "allocate", "preempt", "reclaim"]}),
        "volcano.actions: 'reclaim' is refused: Volcano would evict on its own",
    ),
]


def test_one_preemptor_by_default() -> None:
    """Nothing but the controller evicts: every PriorityClass says Never, Volcano runs no
    evicting action."""
    fleet = parse_fleet(minimal_raw_fleet())
    assert {pc.preemption_policy for pc in fleet.priority_classes()} == {"Never"}
    assert fleet.volcano.actions == ["enqueue", "allocate", "backfill"]


@pytest.mark.parametrize(
    ("edit", "expected"), [(e, x) for _, e, x in BAD_INPUTS], ids=[i for i, _, _ in BAD_INPUTS]
)
def test_bad_input_is_reported_with_path_and_reason(edit: Edit, expected: str) -> None:
    problems = problems_of(edit)
    assert any(expected in p for p in problems), "\n".join(problems)


def test_every_problem_is_reported_at_once() -> None:
    def edit(raw: dict[str, Any]) -> None:
        pool(raw, "h100").update(model="b300")
        pool(raw, "tpu").update(max_nodes=3)
        team(raw, "research")["quota"].update({"google.com/tpu": 64})
        raw["teams"].append(copy.deepcopy(team(raw, "serving")))
        raw["controller"] = {"period_seconds": 420}

    raw = copy.deepcopy(minimal_raw_fleet())
    edit(raw)
    with pytest.raises(ConfigError) as caught:
        parse_fleet(raw)
    paths = [p.path for p in caught.value.problems]
    for expected in (
        "clusters[gke].pools[h100].model",
        "clusters[gke].pools[tpu].max_nodes",
        "teams[research].quota[google.com/tpu]",
        "teams[serving]",
        "controller.period_seconds",
    ):
        assert expected in paths
    message = str(caught.value)
    assert message.startswith(f"invalid fleet configuration ({len(paths)} problems):")
    assert "  clusters[gke].pools[h100].model: unknown accelerator model 'b300'" in message


def test_structural_problems_are_all_reported_at_once() -> None:
    raw = copy.deepcopy(minimal_raw_fleet())
    pool(raw, "h100").update(capacity_type="preemptible", max_nodes=0)
    team(raw, "research").update(monthly_budget_usd="lots")
    with pytest.raises(ConfigError) as caught:
        parse_fleet(raw)
    assert [p.path for p in caught.value.problems] == [
        "clusters[gke].pools[h100].capacity_type",
        "clusters[gke].pools[h100].max_nodes",
        "teams[research].monthly_budget_usd",
    ]


def test_builtin_workload_types_are_merged_field_by_field() -> None:
    raw = copy.deepcopy(minimal_raw_fleet())
    raw["workload_types"] = {"notebook": {"idle": {"window_seconds": 1200}}}
    fleet = parse_fleet(raw)
    assert set(fleet.workload_types) == set(BUILTIN_WORKLOAD_TYPES)
    notebook = fleet.workload_types["notebook"]
    assert notebook.idle is not None
    assert notebook.idle.window_seconds == 1200
    assert notebook.idle.grace_seconds == 900  # built-in default kept
    assert notebook.max_accelerators == 1
    assert fleet.workload_types["inference"].capacity == "on-demand"


def test_an_idle_grace_longer_than_the_window_is_refused() -> None:
    """A warning counts only inside one window: with a longer grace the pod is warned again
    every window and never reclaimed."""
    raw = copy.deepcopy(minimal_raw_fleet())
    raw["workload_types"] = {
        "batch": {"idle": {"window_seconds": 600, "grace_seconds": 601}},
        # the built-in grace (900s) outlasts a shortened window too
        "notebook": {"idle": {"window_seconds": 600}},
        "training": {"idle": {"window_seconds": 600, "grace_seconds": 600}},  # equal is fine
    }
    with pytest.raises(ConfigError) as caught:
        parse_fleet(raw)
    assert sorted(str(p) for p in caught.value.problems) == [
        "workload_types.batch.idle.grace_seconds: 601s is longer than idle.window_seconds (600s):"
        " a warning counts only inside one window, so the pod would be warned again every window"
        " and never reclaimed; make grace_seconds at most window_seconds",
        "workload_types.notebook.idle.grace_seconds: 900s is longer than idle.window_seconds"
        " (600s): a warning counts only inside one window, so the pod would be warned again every"
        " window and never reclaimed; make grace_seconds at most window_seconds",
    ]


def test_the_controller_refuses_a_long_grace_in_the_same_words() -> None:
    """A rendered document edited by hand gets, from the controller, the words a stack gets."""
    from controller.config import ConfigProblems, parse_config
    from fleet.problems import grace_longer_than_window

    document = render_opa_data(parse_fleet(minimal_raw_fleet()))
    idle = next(wt["idle"] for wt in document["workload_types"].values() if wt["idle"])
    idle["grace_seconds"], idle["window_seconds"] = 1800, 600
    with pytest.raises(ConfigProblems) as caught:
        parse_config(document)
    assert grace_longer_than_window(1800, 600) in str(caught.value)


def test_defaults_are_documented_on_every_field() -> None:
    def models(model: type[Any]) -> list[type[Any]]:
        found = [model]
        for f in model.model_fields.values():
            for arg in [f.annotation, *getattr(f.annotation, "__args__", ())]:
                for inner in [arg, *getattr(arg, "__args__", ())]:
                    if isinstance(inner, type) and hasattr(inner, "model_fields"):
                        found += [m for m in models(inner) if m not in found]
        return found

    undocumented = [
        f"{m.__name__}.{name}"
        for m in models(FleetConfig)
        for name, f in m.model_fields.items()
        if not f.description or ("Default" not in f.description and "required" not in f.description)
    ]
    assert undocumented == []


def test_duplicate_yaml_keys_are_an_error(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.x.yaml"
    stack.write_text(
        "config:\n  fleetplane:fleet:\n    models: {}\n    models: {}\n", encoding="utf-8"
    )
    with pytest.raises(ConfigError, match="duplicate key 'models'"):
        load_stack_config(stack)


def test_load_stack_config_reads_the_stack_file(tmp_path: Path) -> None:
    stack = tmp_path / "Pulumi.x.yaml"
    stack.write_text(yaml.safe_dump({"config": {"fleetplane:fleet": minimal_raw_fleet()}}))
    assert load_stack_config(stack) == parse_fleet(minimal_raw_fleet())
    missing = tmp_path / "Pulumi.y.yaml"
    missing.write_text("config:\n  fleetplane:kubeconfig: x\n")
    with pytest.raises(ConfigError, match="no 'fleetplane:fleet' key"):
        load_stack_config(missing)


@pytest.mark.parametrize("stack", ["local", "dev", "prod"])
def test_render_cli_prints_the_opa_data(stack: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert fleetplane("render", "--stack", stack) == 0
    document = json.loads(capsys.readouterr().out)
    assert set(document["teams"]) == {"research", "serving", "analytics"}


def test_render_cli_writes_a_file_and_reports_bad_stacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out" / "data.json"
    assert fleetplane(*["render", "--stack", "local", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["controller"]["lease_name"] == "fleetplane-controller"
    assert fleetplane(*["render", "--stack", "no-such-stack"]) == 2
    assert "no such stack file" in capsys.readouterr().err


def test_stack_files_live_where_pulumi_looks() -> None:
    project = yaml.safe_load((REPO_ROOT / "Pulumi.yaml").read_text())
    assert project["name"] == "fleetplane"
    assert project["stackConfigDir"] == "stacks"
    assert project["main"].rstrip("/") == "stacks"
    # The interpreter comes from PULUMI_PYTHON_CMD: a relative `virtualenv` would be resolved
    # in stacks/ by the provider of dynamic resources (see Pulumi.yaml).
    assert project["runtime"]["options"] == {"toolchain": "pip"}
    assert (REPO_ROOT / "stacks" / "__main__.py").is_file()


# ---------------------------------------------------------------------------------------------
# TPU slice pools: GKE's topologies, machine types and one-slice-per-multi-host-pool rule
# (fleet.catalog.TPU_SLICE_SHAPES says where each fact comes from).
# ---------------------------------------------------------------------------------------------


def tpu_fleet(
    model: str, machine_type: str, topology: str, max_nodes: int, min_nodes: int = 0
) -> dict[str, Any]:
    """The minimal fleet with its TPU pool replaced, priced, and no TPU quota to fit."""
    raw = copy.deepcopy(minimal_raw_fleet())
    pool(raw, "tpu").update(
        model=model,
        machine_type=machine_type,
        tpu_topology=topology,
        min_nodes=min_nodes,
        max_nodes=max_nodes,
    )
    raw["models"].pop("tpu-v5e")
    raw["models"][model] = {"price_per_hour_usd": {"on-demand": 1.0, "spot": 0.5}}
    team(raw, "research")["quota"].pop("google.com/tpu")
    return raw


# (model, machine type, topology, min_nodes, max_nodes)
VALID_TPU_POOLS: list[tuple[str, str, str, int, int]] = [
    # v5e single-host shapes, one per machine type; single-host pools may hold many slices
    ("tpu-v5e", "ct5lp-hightpu-1t", "1x1", 0, 8),
    ("tpu-v5e", "ct5lp-hightpu-4t", "2x2", 1, 8),
    ("tpu-v5e", "ct5lp-hightpu-8t", "2x4", 0, 4),
    # v5e multi-host shapes on ct5lp-hightpu-4t: exactly one slice, scaled from 0 or fixed
    ("tpu-v5e", "ct5lp-hightpu-4t", "2x4", 0, 2),
    ("tpu-v5e", "ct5lp-hightpu-4t", "4x4", 0, 4),
    ("tpu-v5e", "ct5lp-hightpu-4t", "4x4", 4, 4),
    ("tpu-v5e", "ct5lp-hightpu-4t", "16x16", 0, 64),
    # v6e
    ("tpu-v6e", "ct6e-standard-1t", "1x1", 0, 3),
    ("tpu-v6e", "ct6e-standard-8t", "2x4", 0, 3),
    ("tpu-v6e", "ct6e-standard-4t", "2x4", 2, 2),
    ("tpu-v6e", "ct6e-standard-4t", "8x8", 0, 16),
    # v4: single-host 2x2x1, multi-host shapes all <= 4 or all multiples of 4
    ("tpu-v4", "ct4p-hightpu-4t", "2x2x1", 0, 5),
    ("tpu-v4", "ct4p-hightpu-4t", "2x2x4", 0, 4),
    ("tpu-v4", "ct4p-hightpu-4t", "4x4x8", 32, 32),
    # v5p: only whole hosts and one slice per multi-host pool are checked
    ("tpu-v5p", "ct5p-hightpu-4t", "2x2x1", 0, 2),
    ("tpu-v5p", "ct5p-hightpu-4t", "4x4x4", 0, 16),
]


@pytest.mark.parametrize(
    ("model", "machine_type", "topology", "min_nodes", "max_nodes"),
    VALID_TPU_POOLS,
    ids=[f"{m}-{t}-on-{mt}-{lo}..{hi}" for m, mt, t, lo, hi in VALID_TPU_POOLS],
)
def test_tpu_pools_gke_accepts_are_valid(
    model: str, machine_type: str, topology: str, min_nodes: int, max_nodes: int
) -> None:
    fleet = parse_fleet(tpu_fleet(model, machine_type, topology, max_nodes, min_nodes))
    tpu = next(p for p in fleet.pools if p.name == "tpu")
    assert tpu.tpu_topology == topology


TPU = "clusters[gke].pools[tpu]"
V5E_TOPOLOGIES = "1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16"

# (id, (model, machine type, topology, min_nodes, max_nodes), every expected "path: reason")
INVALID_TPU_POOLS: list[tuple[str, tuple[str, str, str, int, int], list[str]]] = [
    (
        "v5e 3x3 is no v5e shape",
        ("tpu-v5e", "ct5lp-hightpu-1t", "3x3", 0, 9),
        [f"{TPU}.tpu_topology: GKE offers no 3x3 slice of tpu-v5e; use one of {V5E_TOPOLOGIES}"],
    ),
    (
        "v5e 1x4 is no v5e shape, though 4 chips fill a ct5lp-hightpu-4t",
        ("tpu-v5e", "ct5lp-hightpu-4t", "1x4", 0, 1),
        [f"{TPU}.tpu_topology: GKE offers no 1x4 slice of tpu-v5e; use one of {V5E_TOPOLOGIES}"],
    ),
    (
        "v5e 4x4 on the single-host ct5lp-hightpu-8t",
        ("tpu-v5e", "ct5lp-hightpu-8t", "4x4", 0, 2),
        [
            f"{TPU}.machine_type: a 4x4 slice of tpu-v5e runs on ct5lp-hightpu-4t, not "
            "ct5lp-hightpu-8t: change the machine type or the topology"
        ],
    ),
    (
        "v5e 2x2 on ct5lp-hightpu-1t",
        ("tpu-v5e", "ct5lp-hightpu-1t", "2x2", 0, 4),
        [
            f"{TPU}.machine_type: a 2x2 slice of tpu-v5e runs on ct5lp-hightpu-4t, not "
            "ct5lp-hightpu-1t: change the machine type or the topology"
        ],
    ),
    (
        "v5e 4x4 pool of two slices",
        ("tpu-v5e", "ct5lp-hightpu-4t", "4x4", 0, 8),
        [
            f"{TPU}.max_nodes: a multi-host 4x4 slice (16 chips, 4 per host on "
            "ct5lp-hightpu-4t) is 4 nodes and its pool holds exactly one slice: set max_nodes "
            "to 4 (for more slices, add one pool per slice)"
        ],
    ),
    (
        "v5e 4x4 pool smaller than its slice, with a partial minimum",
        ("tpu-v5e", "ct5lp-hightpu-4t", "4x4", 2, 3),
        [
            f"{TPU}.max_nodes: a multi-host 4x4 slice (16 chips, 4 per host on "
            "ct5lp-hightpu-4t) is 4 nodes and its pool holds exactly one slice: set max_nodes "
            "to 4",
            f"{TPU}.min_nodes: a multi-host 4x4 slice (16 chips, 4 per host on "
            "ct5lp-hightpu-4t) is 4 nodes and its pool holds exactly one slice, scaled as a "
            "whole: set min_nodes to 0 or 4",
        ],
    ),
    (
        "v6e 2x8 is no v6e shape",
        ("tpu-v6e", "ct6e-standard-4t", "2x8", 0, 4),
        [
            f"{TPU}.tpu_topology: GKE offers no 2x8 slice of tpu-v6e; use one of "
            "1x1, 2x2, 2x4, 4x4, 4x8, 8x8, 8x16, 16x16"
        ],
    ),
    (
        "v4 dimensions neither all at most 4 nor all multiples of 4",
        ("tpu-v4", "ct4p-hightpu-4t", "2x4x8", 0, 16),
        [
            f"{TPU}.tpu_topology: 2x4x8 is not a tpu-v4 topology: its dimensions must be all "
            "at most 4 or all multiples of 4 (e.g. 2x2x4, 4x4x8)"
        ],
    ),
    (
        "v5p topology of half a host",
        ("tpu-v5p", "ct5p-hightpu-4t", "1x1x2", 0, 1),
        [
            f"{TPU}.tpu_topology: topology 1x1x2 has 2 chips, not a multiple of the "
            "4 chips per host of ct5p-hightpu-4t"
        ],
    ),
    (
        "v5e topology with the wrong number of dimensions",
        ("tpu-v5e", "ct5lp-hightpu-4t", "2x2x2", 0, 2),
        [f"{TPU}.tpu_topology: '2x2x2' is not a tpu-v5e topology (expected NxN)"],
    ),
]


@pytest.mark.parametrize(
    ("pool_args", "expected"),
    [(a, x) for _, a, x in INVALID_TPU_POOLS],
    ids=[i for i, _, _ in INVALID_TPU_POOLS],
)
def test_tpu_pools_gke_refuses_are_reported(
    pool_args: tuple[str, str, str, int, int], expected: list[str]
) -> None:
    model, machine_type, topology, min_nodes, max_nodes = pool_args
    with pytest.raises(ConfigError) as caught:
        parse_fleet(tpu_fleet(model, machine_type, topology, max_nodes, min_nodes))
    assert [str(p) for p in caught.value.problems] == expected
