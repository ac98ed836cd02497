"""The fleetplane Pulumi program: the fleet of the selected stack.

The stack file (`stacks/Pulumi.<stack>.yaml`) holds the fleet under `fleetplane:fleet`. It is
validated in full before any resource is declared; an invalid fleet stops the program with
every problem listed by path.
"""

from __future__ import annotations

import pulumi

# The program's Python environment has fleetplane installed (`pip install -e '.[pulumi]'`, which
# `make venv` does): the components are imported from it, not from a path computed here.
from components.platform import Platform, PlatformArgs
from fleet.config import ConfigError, parse_fleet
from fleet.render import render_opa_data

settings = pulumi.Config("fleetplane")
try:
    fleet = parse_fleet(settings.require_object("fleet"))
except ConfigError as error:
    raise pulumi.RunError(str(error)) from None

platform = Platform(
    pulumi.get_stack(),
    PlatformArgs(fleet=fleet, kubeconfig=settings.get("kubeconfig")),
)

rendered = render_opa_data(fleet)
pulumi.export("clusters", sorted(platform.clusters))
pulumi.export("pools", rendered["pools"])
pulumi.export("namespaces", rendered["namespaces"])
pulumi.export("controller", rendered["controller"])
