"""The fleetplane Pulumi program: the fleet of the selected stack.

The stack file (`stacks/Pulumi.<stack>.yaml`) holds the fleet under `fleetplane:fleet`. It is
validated in full before any resource is declared; an invalid fleet stops the program with
every problem listed by path.
"""

from __future__ import annotations

import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# Pulumi runs this directory as the program; the components live one level up.
if str(REPO_ROOT) not in sys.path:
    sys.path.insert(0, str(REPO_ROOT))

import pulumi  # noqa: E402

from components.config import ConfigError, parse_fleet  # noqa: E402
from components.platform import Platform, PlatformArgs  # noqa: E402
from components.render import render_opa_data  # noqa: E402

settings = pulumi.Config("fleetplane")
try:
    fleet = parse_fleet(settings.require_object("fleet"))
except ConfigError as error:
    raise pulumi.RunError(str(error)) from None

platform = Platform(
    pulumi.get_stack(),
    PlatformArgs(fleet=fleet, kubeconfig=settings.get("kubeconfig"), repo_root=REPO_ROOT),
)

rendered = render_opa_data(fleet)
pulumi.export("clusters", sorted(platform.clusters))
pulumi.export("pools", rendered["pools"])
pulumi.export("namespaces", rendered["namespaces"])
pulumi.export("controller", rendered["controller"])
