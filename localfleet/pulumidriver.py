"""The local stack's Pulumi driver: the pinned `pulumi` CLI run offline on a file backend under
the state directory, with the pinned Kubernetes provider installed from tools/bin into
PULUMI_HOME, and the Python SDKs checked against both."""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from localfleet.stacklayout import StackError, StackLayout

CONFIG_FILE_COMMANDS = {"up", "preview", "destroy", "refresh"}
"""The `pulumi` commands that take `--config-file`."""


@dataclass
class PulumiDriver:
    """`pulumi` on the stack of `layout`."""

    layout: StackLayout

    def env(self) -> dict[str, str]:
        """The environment `pulumi` runs with: offline, local state, fixed passphrase."""
        return {
            "PULUMI_HOME": str(self.layout.pulumi_home),
            "PULUMI_BACKEND_URL": f"file://{self.layout.backend_dir}",
            "PULUMI_CONFIG_PASSPHRASE": self.layout.passphrase,
            "PULUMI_SKIP_UPDATE_CHECK": "true",
            "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
            # Plugins come from PULUMI_HOME (exact versions) or beside `pulumi`, never from PATH.
            "PULUMI_IGNORE_AMBIENT_PLUGINS": "true",
            "PULUMI_SKIP_CONFIRMATIONS": "true",
            # The program and the provider of dynamic resources run with this interpreter
            # (Pulumi.yaml names no virtualenv, see there).
            "PULUMI_PYTHON_CMD": str(self.layout.python),
            "PATH": os.pathsep.join(
                [
                    str(self.layout.bin_dir),
                    str(self.layout.python.parent),
                    os.environ.get("PATH", ""),
                ]
            ),
        }

    def run(
        self, *args: str, capture: bool = False, check: bool = True, stack: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run the pinned `pulumi` in the project directory; with `stack`, on this stack (and
        its configuration file, for the commands that run the program)."""
        cmd = [str(self.layout.bin_dir / "pulumi"), *args, "--non-interactive"]
        if stack:
            cmd += ["--stack", self.layout.stack]
        config = self.layout.effective_config
        if config is not None and args and args[0] in CONFIG_FILE_COMMANDS:
            cmd += ["--config-file", str(config)]
        if not capture:
            self.layout.log("$ " + shlex.join(["pulumi", *cmd[1:]]))
        result = subprocess.run(
            cmd,
            cwd=self.layout.root,
            env={**os.environ, **self.env()},
            capture_output=capture,
            text=True,
        )
        if check and result.returncode != 0:
            detail = f":\n{result.stdout}\n{result.stderr}" if capture else ""
            raise StackError(f"`pulumi {' '.join(args)}` exited {result.returncode}{detail}")
        return result

    # The bootstrap (tools/) is run as a process of the checkout, never imported: nothing of the
    # product depends on how upstream binaries are obtained.
    def ensure_tools(self) -> None:
        result = subprocess.run([sys.executable, "-m", "tools.bootstrap"], cwd=self.layout.root)
        if result.returncode != 0:
            raise StackError("the pinned tools could not be obtained (see the bootstrap's output)")

    def pinned_versions(self) -> dict[str, str]:
        """Tool name -> pinned version, as `python -m tools.bootstrap --list` prints them."""
        result = subprocess.run(
            [sys.executable, "-m", "tools.bootstrap", "--list"],
            cwd=self.layout.root,
            capture_output=True,
            text=True,
        )
        if result.returncode != 0:
            raise StackError(f"cannot list the pinned tools: {result.stderr.strip()}")
        return {
            fields[0]: fields[1]
            for fields in (line.split() for line in result.stdout.splitlines())
            if len(fields) >= 2
        }

    def check_sdks(self) -> None:
        """The Python SDKs must be the versions of the CLI and the provider: the SDK asks the
        engine for the provider at its own version."""
        tools = {name: version.lstrip("v") for name, version in self.pinned_versions().items()}
        wanted = {
            "pulumi": tools["pulumi"],
            "pulumi-kubernetes": tools["pulumi-resource-kubernetes"],
        }
        for package, version in wanted.items():
            try:
                installed = importlib.metadata.version(package)
            except importlib.metadata.PackageNotFoundError:
                installed = "none"
            if installed != version:
                raise StackError(
                    f"the virtual environment has {package} {installed}, the pinned tools are "
                    f"for {version}: run `make venv` (pip install -e '.[dev]')"
                )

    def ensure_provider(self) -> None:
        """Install the Kubernetes provider from tools/bin into PULUMI_HOME, offline."""
        version = self.pinned_versions()["pulumi-resource-kubernetes"]
        binary = (self.layout.bin_dir / "pulumi-resource-kubernetes").resolve()
        installed = (
            self.layout.pulumi_home
            / "plugins"
            / f"resource-kubernetes-{version}"
            / "pulumi-resource-kubernetes"
        )
        if installed.exists() and _digest(installed) == _digest(binary):
            return
        self.run(
            "plugin",
            "install",
            "resource",
            "kubernetes",
            version,
            "--file",
            str(binary),
            "--reinstall",
            stack=False,
        )

    def ensure_stack(self) -> None:
        self.layout.backend_dir.mkdir(parents=True, exist_ok=True)
        listed = self.run("stack", "ls", "--json", capture=True, stack=False)
        names = {entry["name"].rsplit("/", 1)[-1] for entry in json.loads(listed.stdout or "[]")}
        if self.layout.stack not in names:
            self.run(
                "stack", "init", self.layout.stack, "--secrets-provider", "passphrase", stack=False
            )

    def resource_count(self) -> int:
        exported = self.run("stack", "export", capture=True)
        deployment = json.loads(exported.stdout).get("deployment", {})
        return len(deployment.get("resources") or [])


def _digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()
