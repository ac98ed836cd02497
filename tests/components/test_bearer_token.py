"""The controller's bearer token for OPA: a dynamic provider that works in Pulumi's provider
process (no repository on its import path), draws a fresh token per resource, keeps it across
updates and gives OPA the hash its authz policy compares."""

from __future__ import annotations

from pathlib import Path

from components.tokens import BearerTokenProvider, generate_token
from fleet.opa import token_sha256
from tests.components.component_testkit import run_provider_outside_the_repository


def test_tokens_are_random_and_known_by_their_hash() -> None:
    first, second = generate_token(), generate_token()
    assert first["token"] != second["token"]
    assert len(first["token"]) >= 43  # 32 random bytes, URL-safe base64
    assert first["sha256"] == token_sha256(first["token"])


def test_provider_runs_without_the_repository_on_the_path(tmp_path: Path) -> None:
    run_provider_outside_the_repository(
        BearerTokenProvider(),
        """
        import hashlib
        result = provider.create({"role": "controller"})
        token = result.outs["token"]
        assert result.outs["sha256"] == hashlib.sha256(token.encode()).hexdigest()
        assert result.outs["role"] == "controller"
        same = provider.diff(result.id, result.outs, {"role": "controller"})
        assert not same.changes
        other = provider.diff(result.id, result.outs, {"role": "approver"})
        assert other.changes and other.replaces == ["role"]
        print("ok")
        """,
        tmp_path,
    )
