"""Validation of the fleet configuration: every bad input names its path and reason."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from component_testkit import REPO_ROOT, minimal_raw_fleet

from components.config import (
    BUILTIN_WORKLOAD_TYPES,
    ConfigError,
    FleetConfig,
    load_stack_config,
    parse_fleet,
)
from components.render import main as render_main

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
        "TPU topology chips not a multiple of chips per host",
        lambda r: pool(r, "tpu").update(tpu_topology="1x2"),
        "clusters[gke].pools[tpu].tpu_topology: topology 1x2 has 2 chips, not a multiple of "
        "the 4 chips per host of ct5lp-hightpu-4t",
    ),
    (
        "TPU node count not a multiple of hosts per slice",
        lambda r: pool(r, "tpu").update(max_nodes=3),
        "clusters[gke].pools[tpu].max_nodes: max_nodes 3 is not a multiple of 2 hosts per "
        "slice (topology 2x4 = 8 chips, 4 chips per host on ct5lp-hightpu-4t)",
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
]


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
    from components.config import grace_longer_than_window as stack_words
    from controller.config import grace_longer_than_window as controller_words

    assert stack_words(1800, 600) == controller_words(1800, 600)


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
    assert render_main(["--stack", stack]) == 0
    document = json.loads(capsys.readouterr().out)
    assert set(document["teams"]) == {"research", "serving", "analytics"}


def test_render_cli_writes_a_file_and_reports_bad_stacks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out" / "data.json"
    assert render_main(["--stack", "local", "--out", str(out)]) == 0
    assert json.loads(out.read_text())["controller"]["lease_name"] == "fleetplane-controller"
    assert render_main(["--stack", "no-such-stack"]) == 2
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
