"""policyreview.diff on a throwaway git repository holding two versions of the policies."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from policyreview import diff as policydiff
from tests.commands import fleetplane
from tests.policies.builders import cpu, notebook, training
from tests.policies.conftest import write_trace

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
CONFIG = json.loads(policydiff.DEFAULT_DATA.read_text())


def _git(repo: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com", *args],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """The project's policies committed as the base; the work tree then drops the node-name
    rule and rewords the priority-class message."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "policies", repo / "policies")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "base")
    rules = repo / "policies" / "fleetplane" / "admission" / "accelerators.rego"
    text = rules.read_text()
    blocks = text.split("\n\n")
    kept = [block for block in blocks if '"node-name: ' not in block]
    dropped = len(blocks) - len(kept)
    text = "\n\n".join(kept)
    assert dropped == 1
    text = text.replace(
        '"priority-class: %s has priorityClassName', '"priority-class: %s sets priorityClassName'
    )
    rules.write_text(text)
    return repo


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    directory = tmp_path / "corpus"
    directory.mkdir()
    cases = {
        "valid-training": training(),
        "node-name": training().node_name("gpu-node-1"),
        "no-priority": notebook().priority(None),
        "cpu": cpu(),
    }
    for name, workload in cases.items():
        (directory / f"{name}.json").write_text(json.dumps(workload.review(uid=name)))
    return directory


def _diff(repo: Path, corpus: Path, *extra: str) -> int:
    args = ["--base", "HEAD", "--repo", str(repo), "--corpus", str(corpus), "--trace", "none"]
    return fleetplane("policy", "diff", *args, *extra)


def test_report_shows_exactly_the_changed_decisions(
    repo: Path, corpus: Path, tmp_path: Path
) -> None:
    output = tmp_path / "report.md"
    code = _diff(repo, corpus, "--output", str(output))
    report = output.read_text()
    assert code == 0
    assert (
        "4 admission requests evaluated on both sides; **2 decisions changed**, 2 unchanged."
        in report
    )
    assert "| denied → allowed | 1 |" in report
    assert "| denied, messages changed | 1 |" in report
    assert "| research | training | 1 | 0 | 1 |" in report
    assert "| research | notebook | 0 | 1 | 1 |" in report
    assert "`node-name.json`" in report and "`no-priority.json`" in report
    assert "valid-training" not in report and "`cpu.json`" not in report
    assert "  - `node-name: pod sets spec.nodeName" in report
    assert "sets priorityClassName null" in report and "has priorityClassName null" in report
    assert "- base: 2 allowed, 2 denied" in report
    assert "- working tree: 3 allowed, 1 denied" in report


def test_unchanged_policies_report_no_change(repo: Path, corpus: Path, tmp_path: Path) -> None:
    _git(repo, "checkout", "-q", "--", "policies")
    output = tmp_path / "report.md"
    assert _diff(repo, corpus, "--output", str(output), "--fail-on-change") == 0
    assert "No admission decision changed." in output.read_text()


def test_fail_on_change(repo: Path, corpus: Path) -> None:
    assert _diff(repo, corpus, "--fail-on-change") == 1


def test_unknown_ref_fails_to_run(
    repo: Path, corpus: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = fleetplane(
        "policy",
        "diff",
        *["--base", "no-such-ref", "--repo", str(repo), "--corpus", str(corpus), "--trace", "none"],
    )
    assert code == 2
    assert "is not a commit" in capsys.readouterr().err


def test_base_without_policies_has_no_decisions(tmp_path: Path, corpus: Path) -> None:
    repo = tmp_path / "empty"
    repo.mkdir()
    (repo / "README").write_text("x\n")
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "base")
    shutil.copytree(ROOT / "policies", repo / "policies")
    output = tmp_path / "report.md"
    assert (
        fleetplane(
            "policy",
            "diff",
            *[
                "--base",
                "HEAD",
                "--repo",
                str(repo),
                "--corpus",
                str(corpus),
                "--trace",
                "none",
                "--output",
                str(output),
            ],
        )
        == 0
    )
    report = output.read_text()
    assert "**4 decisions changed**" in report
    assert "| no decision → allowed | 2 |" in report


def test_trace_mapping_is_deterministic_and_typed(tmp_path: Path) -> None:
    trace = write_trace(
        tmp_path / "trace.csv",
        [
            {"name": "cpu", "num_gpu": 0, "gpu_milli": 0, "qos": "LS"},
            {"name": "share", "num_gpu": 1, "gpu_milli": 460, "qos": "LS"},
            {"name": "serve", "num_gpu": 1, "gpu_milli": 1000, "qos": "LS"},
            {"name": "batch", "num_gpu": 1, "gpu_milli": 1000, "qos": "BE"},
            {"name": "big", "num_gpu": 8, "gpu_milli": 1000, "qos": "LS"},
        ],
    )
    first = policydiff.generate_from_trace(trace, CONFIG, seed=7)
    assert first == policydiff.generate_from_trace(trace, CONFIG, seed=7)
    described = [policydiff.describe(r.review, CONFIG["namespaces"]) for r in first]
    assert [(kind, workload_type) for _, workload_type, kind in described] == [
        ("Pod", "—"),
        ("Pod", "notebook"),
        ("Deployment", "inference"),
        ("Job", "batch"),
        ("Volcano Job", "training"),
    ]
    assert [r.review["request"]["uid"] for r in first] == ["cpu", "share", "serve", "batch", "big"]
    assert policydiff.generate_from_trace(trace, CONFIG, seed=7, limit=2)[1] == first[1]
