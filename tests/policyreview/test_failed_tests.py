"""What `fleetplane policy test` says when `opa test` fails: the tests that failed in that run
(policyreview/checks.py), not a rerun's output."""

from __future__ import annotations

import json
import subprocess

from policyreview.checks import failed_tests


def completed(stdout: str, code: int = 2) -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess(["opa", "test"], code, stdout, "opa: tests failed")


def test_names_each_failed_and_erred_test_with_its_duration() -> None:
    results = [
        {"location": {"file": "a_test.rego"}, "package": "data.x", "name": "test_ok"},
        {
            "location": {"file": "a_test.rego"},
            "package": "data.x",
            "name": "test_bad",
            "fail": True,
            "duration": 2_500_000_000,
        },
        {
            "location": {"file": "b_test.rego"},
            "package": "data.y",
            "name": "test_slow",
            "error": {"code": "eval_cancel_error", "message": "caller cancelled query"},
            "duration": 900_000_000_000,
        },
    ]
    said = failed_tests(completed(json.dumps(results)))
    assert said.splitlines() == [
        "a_test.rego: data.x.test_bad: FAIL (2.5s)",
        "b_test.rego: data.y.test_slow: ERROR {'code': 'eval_cancel_error', 'message': "
        "'caller cancelled query'} (900.0s)",
    ]


def test_output_that_is_not_results_is_shown_as_it_is() -> None:
    said = failed_tests(completed("1 error occurred: x.rego:3: rego_parse_error"))
    assert "rego_parse_error" in said and "opa: tests failed" in said
