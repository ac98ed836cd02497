"""Bearer tokens for OPA's API, without a random provider plugin.

`BearerToken` is a Pulumi dynamic resource, built as `components/tls.py`'s `TlsBundle` is: at
deploy time its provider draws 32 random bytes (`secrets.token_urlsafe`) and Pulumi keeps the
token in the stack state as a secret, with its SHA-256 (what OPA's authz document holds) in the
clear. Later deployments reuse the state; rotate with `pulumi up --replace <urn of the
token>`, which also rolls OPA (the hash is in its pod template) and the controller reads the
new Secret at its next pass. The pulumi-random provider would do the same but is one more
plugin to obtain; this needs nothing beyond the Python standard library.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi.dynamic


@dataclass(frozen=True, kw_only=True)
class TokenMaterial:
    """A bearer token and the hex SHA-256 of it (plain strings or Pulumi outputs)."""

    token: Any
    sha256: Any


def _build() -> tuple[Callable[[], dict[str, str]], type[pulumi.dynamic.ResourceProvider]]:
    def generate() -> dict[str, str]:
        import hashlib
        import secrets

        token = secrets.token_urlsafe(32)
        return {"token": token, "sha256": hashlib.sha256(token.encode()).hexdigest()}

    class Provider(pulumi.dynamic.ResourceProvider):
        def create(self, props: dict[str, Any]) -> pulumi.dynamic.CreateResult:
            from pulumi.dynamic import CreateResult

            material = generate()
            return CreateResult(id_=material["sha256"][:16], outs={**props, **material})

        def diff(
            self, _id: str, olds: dict[str, Any], news: dict[str, Any]
        ) -> pulumi.dynamic.DiffResult:
            from pulumi.dynamic import DiffResult

            changed = olds.get("role") != news.get("role")
            return DiffResult(
                changes=changed, replaces=["role"] if changed else [], delete_before_replace=False
            )

    return generate, Provider


generate_token, BearerTokenProvider = _build()
"""`generate_token()` -> {token, sha256}."""


class BearerToken(pulumi.dynamic.Resource):
    """A random bearer token for `role`, generated once and kept in the state (secret)."""

    token: pulumi.Output[str]
    sha256: pulumi.Output[str]

    def __init__(self, name: str, *, role: str, opts: pulumi.ResourceOptions | None = None) -> None:
        super().__init__(
            BearerTokenProvider(),
            name,
            {"role": role, "token": None, "sha256": None},
            pulumi.ResourceOptions.merge(
                opts, pulumi.ResourceOptions(additional_secret_outputs=["token"])
            ),
        )

    @property
    def material(self) -> TokenMaterial:
        return TokenMaterial(token=self.token, sha256=self.sha256)
