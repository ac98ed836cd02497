"""OPA's own API behind authentication and authorization, as the gate runs it: a real OPA with
`--authentication=token --authorization=basic`, the `system.authz` policy and an authz document
loaded at start. The API server's webhook (no token) may only ask for admission decisions; the
controller (its bearer token, sent by controller.act.opa) may ask for its decisions and write
spend, but not policies or the configuration; nobody else may write anything."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
import requests

from controller.act.opa import SPEND_PATH, Opa
from controller.errors import PermanentError
from localfleet.servers import OpaServer
from policyreview.diff import CORPUS_DIR
from tests.controller.conftest import CONTROLLER_TOKEN, GATE_REVISION, gate_opa, token_file
from tests.policies.builders import cpu, training

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def opa(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OpaServer]:
    config = json.loads((CORPUS_DIR / "config.json").read_text())
    server = gate_opa(tmp_path_factory.mktemp("authz"), config)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def call(
    opa: OpaServer, method: str, path: str, body: Any = None, token: str | None = None
) -> requests.Response:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return requests.request(
        method,
        f"{opa.url}{path}",
        data=None if body is None else orjson.dumps(body),
        headers=headers,
        timeout=10,
    )


def spend_document(usd: float) -> dict[str, Any]:
    return {"research": {"month": "2026-11", "usd": usd, "updated_at": 1795000000}}


def test_anonymous_data_writes_are_refused(opa: OpaServer) -> None:
    for method, path in [
        ("PUT", "/v1/data/fleetplane/spend"),
        ("PATCH", "/v1/data/fleetplane/spend"),
        ("PUT", "/v1/data/fleetplane/config"),
        ("PUT", "/v1/data/fleetplane/authz"),
        ("PUT", "/v1/data"),
    ]:
        body = [] if method == "PATCH" else spend_document(1.0)
        answer = call(opa, method, path, body)
        assert answer.status_code == 401, (method, path, answer.text)
    # nothing reads data anonymously either, the authz document least of all
    assert call(opa, "GET", "/v1/data/fleetplane/authz").status_code == 401
    assert call(opa, "GET", "/v1/data/fleetplane/spend").status_code == 401


def test_anonymous_admission_decisions_are_answered(opa: OpaServer) -> None:
    """The API server of a managed control plane sends no token: its reviews get answers, at
    OPA's default decision and at the decision's path."""
    allowed = call(opa, "POST", "/", cpu().review())
    assert allowed.status_code == 200, allowed.text
    assert allowed.json()["response"]["allowed"] is True
    denied = call(opa, "POST", "/", training().typed(None).review())
    assert denied.status_code == 200
    assert denied.json()["response"]["allowed"] is False
    by_path = call(opa, "POST", "/v1/data/system/main", {"input": cpu().review()})
    assert by_path.status_code == 200
    assert by_path.json()["result"]["response"]["allowed"] is True
    # ... but not the controller's decisions, nor ad hoc queries
    assert call(opa, "POST", "/v1/data/fleetplane/decisions/reclaim", {}).status_code == 401
    assert call(opa, "POST", "/v1/query", {"query": "data"}).status_code == 401


def test_health_is_open(opa: OpaServer) -> None:
    assert call(opa, "GET", "/health").status_code == 200


def test_the_controller_writes_spend_with_its_token(opa: OpaServer, tmp_path: Path) -> None:
    client = Opa(opa.url, token_file=token_file(tmp_path), timeout=5)
    try:
        client.put_data(SPEND_PATH, spend_document(1234.5), what="spend")
        decision = client.decide("reclaim", {})  # malformed input: a refusal, not an error
    finally:
        client.close()
    assert decision.allow is False and decision.reasons
    read = call(opa, "GET", "/v1/data/fleetplane/spend", token=CONTROLLER_TOKEN)
    assert read.json()["result"] == spend_document(1234.5)


def test_the_controller_may_not_replace_policies_or_configuration(opa: OpaServer) -> None:
    policy = "package system\n\nmain := {}\n"
    answer = requests.put(
        f"{opa.url}/v1/policies/takeover",
        data=policy,
        headers={"Authorization": f"Bearer {CONTROLLER_TOKEN}"},
        timeout=10,
    )
    assert answer.status_code == 401, answer.text
    for path in ("/v1/data/fleetplane/config", "/v1/data/fleetplane/authz", "/v1/data"):
        assert call(opa, "PUT", path, {}, token=CONTROLLER_TOKEN).status_code == 401, path
    # the gate still answers as before
    assert call(opa, "POST", "/", cpu().review()).json()["response"]["allowed"] is True


def test_a_controller_without_the_right_token_is_refused(opa: OpaServer, tmp_path: Path) -> None:
    wrong = tmp_path / "wrong"
    wrong.write_text("not-the-token")
    for client in (Opa(opa.url, timeout=5), Opa(opa.url, token_file=str(wrong), timeout=5)):
        try:
            with pytest.raises(PermanentError, match="authorization refused"):
                client.put_data(SPEND_PATH, spend_document(1.0), what="spend")
            with pytest.raises(PermanentError, match="HTTP 401"):
                client.decide("reclaim", {})
        finally:
            client.close()


def test_a_missing_token_file_is_a_permanent_error(tmp_path: Path) -> None:
    missing = tmp_path / "absent"
    with pytest.raises(PermanentError, match=f"OPA token file {missing}: cannot read"):
        Opa("http://127.0.0.1:1", token_file=str(missing))
    empty = tmp_path / "empty"
    empty.write_text("\n")
    with pytest.raises(PermanentError, match="empty"):
        Opa("http://127.0.0.1:1", token_file=str(empty))


def test_the_controller_reads_the_revision_its_kept_answers_are_kept_under(
    opa: OpaServer, tmp_path: Path
) -> None:
    """The disruption concern keeps its answers under `data.fleetplane.revision`: with the
    gate's authorization on, the controller's token reads it (a refusal would leave every pod
    asked every pass); a caller without the token does not."""
    client = Opa(opa.url, token_file=token_file(tmp_path), timeout=5)
    try:
        assert client.revision() == GATE_REVISION
    finally:
        client.close()
    assert call(opa, "GET", "/v1/data/fleetplane/revision").status_code == 401  # OPA: unauthorized
