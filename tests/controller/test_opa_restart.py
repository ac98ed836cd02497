"""Spend survives an OPA restart: the controller keeps the spend it publishes in the ConfigMap
OPA loads at start (controller/act/opa_files.py), so a replica that restarts refuses a team
over budget right away, before any controller pass. Real kube-apiserver, real OPA run as the
gate's (authorization on, data loaded from files as the Deployment mounts them)."""

from __future__ import annotations

import io
import json
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import requests

from controller.config import parse_config
from controller.errors import NotFoundError
from controller.observe.kube import KubeClient, object_path
from controller.reconcile import run_pass
from fleet.opa import SPEND_FILE_KEY, controller_data_files
from localfleet.controlplane import LocalCluster
from localfleet.servers import OpaServer
from policyreview.diff import CORPUS_DIR
from tests.controller.conftest import (
    CONTROLLER_TOKEN,
    KEPT,
    gate_opa,
    gate_settings,
    research_home_config,
    spent_this_month,
)
from tests.policies.builders import Verdict, training

pytestmark = pytest.mark.integration


def review(opa: OpaServer, namespace: str) -> Verdict:
    """A day of 8 H100 for team research (about $2,360), as the API server sends it: no token."""
    answer = requests.post(
        f"{opa.url}/",
        json=training().in_namespace(namespace).in_queue("research").review(),
        timeout=10,
    )
    assert answer.status_code == 200, answer.text
    return Verdict(answer.json()["response"])


def mount(configmap: dict[str, Any], directory: Path) -> None:
    """The ConfigMap's files, where the Deployment's volume puts them (and the local fleet)."""
    for path, text in controller_data_files(configmap.get("data") or {}).items():
        target = directory / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)


def test_a_team_over_budget_is_still_refused_after_opa_restarts(
    kube: LocalCluster, namespace: str, tmp_path: Path
) -> None:
    config = research_home_config(namespace)
    client = KubeClient.from_kubeconfig(str(kube.kubeconfig))
    # research has spent $49,000 of its $50,000 this month (its accumulator, deleted pods)
    spent_this_month(client, namespace, 49_000.0)
    kept = tmp_path / "controller-data"
    kept.mkdir()
    opa = gate_opa(tmp_path, config, kept)
    opa.start()
    settings = gate_settings(opa, tmp_path, namespace, kept=True)
    try:
        assert review(opa, namespace).allowed  # OPA has no spend yet

        # a dry run says what it would keep, and keeps nothing
        printed = io.StringIO()
        dry = run_pass(
            kube=client,
            fleet=parse_config(config),
            settings=replace(settings, dry_run=True),
            concerns=("spend",),
            now=time.time(),
            out=printed,
        )
        assert dry.as_dict()["dry_run"] == 1
        assert f"would keep ConfigMap/{namespace}/{KEPT}: spend" in printed.getvalue()
        with pytest.raises(NotFoundError):
            client.get(object_path("v1", "configmaps", namespace, KEPT))

        summary = run_pass(
            kube=client,
            fleet=parse_config(config),
            settings=settings,
            concerns=("spend",),
            now=time.time(),
        )
        assert not summary.errors, summary.as_dict()
        refused = review(opa, namespace)
        assert refused.rules == {"budget"}
        assert refused.says("would reach 103% of its monthly budget")

        configmap = client.get(object_path("v1", "configmaps", namespace, KEPT))
        assert set(configmap["data"]) == {SPEND_FILE_KEY}  # the spend concern keeps its own key
        published = requests.get(
            f"{opa.url}/v1/data/fleetplane/spend",
            headers={"Authorization": f"Bearer {CONTROLLER_TOKEN}"},
            timeout=10,
        ).json()["result"]
        assert json.loads(configmap["data"]["spend.json"]) == published
        mount(configmap, kept)

        opa.restart()  # a new process: an empty store, loaded from the files again
        after = review(opa, namespace)
        assert after.rules == {"budget"}
        assert after.messages == refused.messages

        # the next pass writes the key again (a patch this time), and nothing else
        run_pass(
            kube=client,
            fleet=parse_config(config),
            settings=settings,
            concerns=("spend",),
            now=time.time() + 60,
        )
        again = client.get(object_path("v1", "configmaps", namespace, KEPT))
        assert set(again["data"]) == {SPEND_FILE_KEY}
        assert json.loads(again["data"]["spend.json"])["research"]["usd"] >= 49_000
    finally:
        opa.stop()
        client.close()


def test_without_the_file_a_restarted_opa_forgets_the_spend(tmp_path: Path) -> None:
    """Why the file is needed: spend written only through the API is gone after a restart."""
    config = json.loads((CORPUS_DIR / "config.json").read_text())
    opa = gate_opa(tmp_path, config)
    opa.start()
    try:
        month = time.strftime("%Y-%m", time.gmtime())
        spend = {"research": {"month": month, "usd": 49_000.0, "updated_at": int(time.time())}}
        put = requests.put(
            f"{opa.url}/v1/data/fleetplane/spend",
            json=spend,
            headers={"Authorization": f"Bearer {CONTROLLER_TOKEN}"},
            timeout=10,
        )
        assert put.status_code == 204, put.text
        assert review(opa, "ml-research").rules == {"budget"}
        opa.restart()
        assert review(opa, "ml-research").allowed
    finally:
        opa.stop()
