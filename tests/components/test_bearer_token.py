"""The controller's bearer token for OPA: a dynamic provider that works in Pulumi's provider
process (no repository on its import path), draws a fresh token per resource, keeps it across
updates and gives OPA the hash its authz policy compares."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

from pulumi.dynamic.dynamic import serialize_provider

from components.tokens import BearerTokenProvider, generate_token
from fleet.opa import token_sha256


def test_tokens_are_random_and_known_by_their_hash() -> None:
    first, second = generate_token(), generate_token()
    assert first["token"] != second["token"]
    assert len(first["token"]) >= 43  # 32 random bytes, URL-safe base64
    assert first["sha256"] == token_sha256(first["token"])


def test_provider_runs_without_the_repository_on_the_path(tmp_path: Path) -> None:
    serialized = serialize_provider(BearerTokenProvider())
    script = textwrap.dedent(
        """
        import base64, hashlib, sys, dill
        provider = dill.loads(base64.b64decode(sys.stdin.read()))
        result = provider.create({"role": "controller"})
        token = result.outs["token"]
        assert result.outs["sha256"] == hashlib.sha256(token.encode()).hexdigest()
        assert result.outs["role"] == "controller"
        same = provider.diff(result.id, result.outs, {"role": "controller"})
        assert not same.changes
        other = provider.diff(result.id, result.outs, {"role": "approver"})
        assert other.changes and other.replaces == ["role"]
        print("ok")
        """
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=serialized,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
