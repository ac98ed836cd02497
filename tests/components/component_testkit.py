"""Helpers of the component tests: a harness that runs Pulumi programs under the official
mocks and records what they declare, and a minimal valid fleet to mutate."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.dynamic.dynamic import serialize_provider

REPO_ROOT = Path(__file__).resolve().parents[2]
STACKS = ("local", "dev", "prod")

FAKE_TLS = {"ca_pem": "FAKE-CA-PEM", "cert_pem": "FAKE-CERT-PEM", "key_pem": "FAKE-KEY-PEM"}
"""What the mocked TlsBundle returns; tests render manifests with the same material."""
FAKE_TOKEN = {"token": "FAKE-CONTROLLER-TOKEN", "sha256": "f" * 64}
"""What the mocked BearerToken returns; tests render manifests with the same material."""


SECRET_SIGNATURE = ("4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270")
"""How Pulumi's wire format marks a secret value (`{sig: secret, value: ...}`)."""


def normalise(value: Any) -> Any:
    """Undo the mocks' serialisation: whole floats back to ints, secrets unwrapped."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict) and value.get(SECRET_SIGNATURE[0]) == SECRET_SIGNATURE[1]:
        return normalise(value["value"])
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    return value


@dataclass
class Registration:
    typ: str
    name: str
    inputs: dict[str, Any]
    custom: bool


class RecordingMocks(pulumi.runtime.Mocks):
    """invokes: what a provider function answers, by token (e.g.
    `gcp:container/getCluster:getCluster`); others answer nothing."""

    def __init__(self, invokes: dict[str, dict[str, Any]] | None = None) -> None:
        self.registrations: list[Registration] = []
        self.invokes = invokes or {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        inputs = normalise(dict(args.inputs))
        self.registrations.append(
            Registration(typ=args.typ, name=args.name, inputs=inputs, custom=bool(args.custom))
        )
        outputs = dict(args.inputs)
        if args.typ == "pulumi-python:dynamic:Resource":
            # a BearerToken has a role; a TlsBundle has DNS names
            outputs.update(FAKE_TOKEN if "role" in args.inputs else FAKE_TLS)
        return f"{args.name}-id", outputs

    def call(
        self, args: pulumi.runtime.MockCallArgs
    ) -> tuple[dict[Any, Any], list[tuple[str, str]] | None]:
        return self.invokes.get(args.token, {}), []


class _ListHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


@dataclass
class Declared:
    """Everything a program declared under the mocks."""

    registrations: list[Registration]
    urns: list[str]
    logs: list[str] = field(default_factory=list)

    def of_type(self, typ: str) -> list[Registration]:
        return [r for r in self.registrations if r.typ == typ]

    def one(self, typ: str, name: str | None = None) -> Registration:
        found = [r for r in self.of_type(typ) if name is None or r.name == name]
        assert len(found) == 1, f"expected one {typ} {name or ''}, got {[r.name for r in found]}"
        return found[0]

    def kubernetes_objects(self) -> list[dict[str, Any]]:
        """Inputs of every Kubernetes object (not providers, not Helm releases)."""
        return [
            r.inputs
            for r in self.registrations
            if r.typ.startswith("kubernetes:") and r.typ != "kubernetes:helm.sh/v3:Release"
        ]

    def kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.kubernetes_objects() if o.get("kind") == kind]


CONTROLLER_IMAGE = "us-docker.pkg.dev/acme/fleetplane/controller@sha256:" + "c" * 64
VALIDATOR_IMAGE = "us-docker.pkg.dev/acme/fleetplane/validator@sha256:" + "d" * 64
OPA_IMAGE = "us-docker.pkg.dev/acme/fleetplane/opa@sha256:" + "0" * 64
PUSHGATEWAY_IMAGE = "us-docker.pkg.dev/acme/fleetplane/pushgateway@sha256:" + "e" * 64


def minimal_raw_fleet() -> dict[str, Any]:
    """A small valid GKE fleet: on-demand and spot H100 pools, a TPU v5e pool (one 2x4 slice
    of ct5lp-hightpu-4t: 2 hosts), a research team and a serving team; the platform's images
    by digest."""
    return {
        "opa": {"image": OPA_IMAGE},
        "controller": {"image": CONTROLLER_IMAGE},
        "upgrade": {"validator_image": VALIDATOR_IMAGE},
        "observability": {"pushgateway": {"image": PUSHGATEWAY_IMAGE}},
        "clusters": [
            {
                "name": "gke",
                "provider": "gcp",
                "project": "acme",
                "region": "us-central1",
                "pools": [
                    {
                        "name": "h100",
                        "model": "h100-80gb",
                        "machine_type": "a3-highgpu-8g",
                        "max_nodes": 2,
                    },
                    {
                        "name": "h100-spot",
                        "model": "h100-80gb",
                        "machine_type": "a3-highgpu-8g",
                        "capacity_type": "spot",
                        "max_nodes": 4,
                    },
                    {
                        "name": "tpu",
                        "model": "tpu-v5e",
                        "machine_type": "ct5lp-hightpu-4t",
                        "tpu_topology": "2x4",
                        "max_nodes": 2,
                    },
                ],
            }
        ],
        "models": {
            "h100-80gb": {"price_per_hour_usd": {"on-demand": 11.0, "spot": 4.0}},
            "tpu-v5e": {"price_per_hour_usd": {"on-demand": 1.2, "spot": 0.5}},
        },
        "teams": [
            {
                "name": "research",
                "monthly_budget_usd": 1000,
                "quota": {"nvidia.com/gpu": 16, "google.com/tpu": 8},
                "guaranteed": {"nvidia.com/gpu": 8},
            },
            {
                "name": "serving",
                "monthly_budget_usd": 1000,
                "allowed_models": ["h100-80gb"],
                "quota": {"nvidia.com/gpu": 8},
                "budget_exempt_types": ["inference"],
            },
        ],
    }


Declare = Callable[[Callable[[], object]], Declared]


def run_program(
    build: Callable[[], object], invokes: dict[str, dict[str, Any]] | None = None
) -> Declared:
    """Run `build` as a Pulumi program under the mocks (provider functions answering from
    `invokes`); return what it declared."""
    mocks = RecordingMocks(invokes)
    handler = _ListHandler()
    logger = logging.getLogger(f"pulumi-mocks-{id(mocks)}")
    logger.setLevel(logging.INFO)
    logger.addHandler(handler)
    pulumi.runtime.set_mocks(
        mocks, project="fleetplane", stack="test", preview=False, logger=logger
    )

    @pulumi.runtime.test
    def program() -> pulumi.Output[None]:
        build()
        return pulumi.Output.from_input(None)

    program()
    monitor = pulumi.runtime.settings.get_monitor()
    return Declared(
        registrations=mocks.registrations,
        urns=list(getattr(monitor, "resources", {})),
        logs=handler.messages,
    )


def run_provider_outside_the_repository(provider: object, checks: str, cwd: Path) -> None:
    """Run `checks` (Python, with `provider` bound to the dynamic provider as Pulumi's provider
    process unpickles it) in a fresh interpreter without the repository on its import path, as
    that process runs; it must print `ok`."""
    serialized = serialize_provider(provider)
    root = str(Path(__file__).resolve().parents[2])
    script = (
        "import base64, sys, dill\n"
        f"assert not any(p.rstrip('/') == {root!r} for p in sys.path), sys.path\n"
        "provider = dill.loads(base64.b64decode(sys.stdin.read()))\n" + textwrap.dedent(checks)
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", script],
        input=serialized,
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"
