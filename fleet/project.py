"""Where a fleetplane project's files are: its policies and its stack files.

A project is a directory holding `Pulumi.yaml` beside `policies/` and `stacks/` (this repository
is one; a platform team's own repository is another). Commands that read policies or stacks use
the project found by walking up from the working directory, as `pulumi` does, so edits in the
project are what runs. Outside any project they use the copies that ship inside this package
(`fleet/policies` and `fleet/stacks` are links to the top-level folders in a checkout, and
become copies in a wheel), so an installed `fleetplane` runs anywhere.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent


class ProjectError(LookupError):
    """No project where one is required; the message says where it was looked for."""


def find_project(start: Path | None = None) -> Path | None:
    """The nearest directory, from `start` (default: the working directory) upwards, holding
    `Pulumi.yaml` and `policies/`; None when there is none."""
    here = (start or Path.cwd()).resolve()
    for directory in (here, *here.parents):
        if (directory / "Pulumi.yaml").is_file() and (directory / "policies").is_dir():
            return directory
    return None


def require_project(start: Path | None = None) -> Path:
    """The project around `start`; ProjectError when there is none."""
    root = find_project(start)
    if root is None:
        where = (start or Path.cwd()).resolve()
        raise ProjectError(
            f"no fleetplane project at or above {where} (looked for Pulumi.yaml beside policies/)"
        )
    return root


def policies_dir(start: Path | None = None) -> Path:
    """The project's `policies/`, else the policies shipped with the package."""
    root = find_project(start)
    return root / "policies" if root else PACKAGE_DIR / "policies"


def stacks_dir(start: Path | None = None) -> Path:
    """The project's `stacks/`, else the example stacks shipped with the package."""
    root = find_project(start)
    return root / "stacks" if root else PACKAGE_DIR / "stacks"


def stack_file(stack: str, start: Path | None = None) -> Path:
    """`Pulumi.<stack>.yaml` of the project (or of the shipped examples)."""
    return stacks_dir(start) / f"Pulumi.{stack}.yaml"
