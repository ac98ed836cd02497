"""Where the local stack keeps its parts, and what every part of it reads: the state
directory's layout, the stack's configuration, the running cluster and real node.

`LocalStack` (localfleet/stack.py) is this layout plus its lifecycle; the Pulumi driver
(localfleet/pulumidriver.py), the loopback services (localfleet/stackservices.py), the
controller on the host (localfleet/hostcontroller.py) and the status
(localfleet/stackstatus.py) each take the layout and nothing else.
"""

from __future__ import annotations

import sys
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from localfleet.controlplane import BIN_DIR, ROOT, LocalCluster

STACK = "local"
LOCAL_PASSPHRASE = "fleetplane-local"
"""Passphrase of the local stack's secrets provider: fixed and public on purpose (see
localfleet/stack.py)."""
STATE_DIR = ROOT / ".fleet"


class StackError(RuntimeError):
    """A step of the local stack failed; the message names the step and the cause."""


def host_port(url: str) -> tuple[str, int]:
    parsed = urllib.parse.urlsplit(url)
    if parsed.hostname is None or parsed.port is None:
        raise StackError(f"{url}: expected scheme://HOST:PORT")
    return parsed.hostname, parsed.port


def loopback(url: str) -> bool:
    return urllib.parse.urlsplit(url).hostname in {"127.0.0.1", "localhost", "::1"}


@dataclass
class StackLayout:
    """The `local` stack's state and configuration.

    state_dir: where the cluster (`local/`), the Pulumi backend (`pulumi/`), PULUMI_HOME
    (`pulumi-home/`) and the loopback services (`services/`, their logs among them) live.
    config_file: the stack configuration to use instead of `stacks/Pulumi.local.yaml` (passed
    as `--config-file`); its `fleetplane:kubeconfig` must name `<state_dir>/local/kubeconfig`.
    """

    state_dir: Path = STATE_DIR
    config_file: Path | None = None
    stack: str = STACK
    passphrase: str = LOCAL_PASSPHRASE
    bin_dir: Path = BIN_DIR
    root: Path = ROOT
    log: Callable[[str], None] = field(default=lambda message: None)
    real_node: bool = False
    """Start a real node beside the fake ones (localfleet.realnode) and run the gate and the
    controller in the cluster, from the images in `images_dir` (`fleetplane image build`)."""
    images_dir: Path = STATE_DIR / "images"
    alert_webhook: str | None = None
    """Where the local Alertmanager posts the rule set's alerts (an Alertmanager webhook
    receiver's URL, with a 5 s group wait); None: the alerts are only shown by Alertmanager."""
    alertmanager_port: int = 0
    """Where the local Alertmanager listens on loopback: 0 (tests, a second stack) a free
    port; the main job asks for Alertmanager's usual 9093, and fails if something holds it."""

    @property
    def python(self) -> Path:
        """The virtual environment's interpreter (the one running this, under `make`)."""
        venv = self.root / ".venv" / "bin" / "python"
        return venv if venv.exists() else Path(sys.executable)

    @property
    def cluster_dir(self) -> Path:
        return self.state_dir / "local"

    @property
    def backend_dir(self) -> Path:
        return self.state_dir / "pulumi"

    @property
    def pulumi_home(self) -> Path:
        return self.state_dir / "pulumi-home"

    @property
    def services_dir(self) -> Path:
        return self.state_dir / "services"

    @property
    def stack_file(self) -> Path:
        return self.config_file or self.root / "stacks" / f"Pulumi.{self.stack}.yaml"

    @property
    def real_node_config(self) -> Path:
        """The stack configuration `up --real-node` derives from `stack_file` (see
        `LocalStack.configure_real_node`); it exists while the cluster with the real node
        does."""
        return self.cluster_dir / f"Pulumi.{self.stack}.real-node.yaml"

    @property
    def effective_config(self) -> Path | None:
        """The configuration file `pulumi` and the summary use."""
        return self.real_node_config if self.real_node_config.exists() else self.config_file

    @property
    def network_record(self) -> Path:
        return self.cluster_dir / "network.json"

    def node(self) -> Any:
        """The real node of the running cluster, or None."""
        from localfleet.nodenet import NodeNetwork
        from localfleet.realnode import RealNode

        network = NodeNetwork.recorded(self.network_record)
        if network is None:
            return None
        return RealNode(self.cluster, network, self.cluster_dir / "node", log=self.log)

    @property
    def cluster(self) -> LocalCluster:
        cluster = LocalCluster(
            data_dir=self.cluster_dir, bin_dir=self.bin_dir, keep=True, detach=True, log=self.log
        )
        cluster.running_pids()  # reads where it listens (its ports, its bind address)
        return cluster

    @property
    def volcano(self) -> Any:
        from localfleet.volcano import LocalVolcano

        return LocalVolcano(
            cluster=self.cluster, fleet=self.fleet(), bin_dir=self.bin_dir, log=self.log
        )

    def fleet(self) -> Any:
        from fleet.config import load_stack_config

        return load_stack_config(self.effective_config or self.stack_file)

    def served_here(self, url: str) -> bool:
        """Whether the local fleet serves `url` itself: on loopback, or on the host's end of
        the real node's veth (where its pods reach the host)."""
        node = self.node()
        return loopback(url) or (node is not None and host_port(url)[0] == node.network.host_ip)
