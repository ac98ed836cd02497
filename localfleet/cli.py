"""`fleetplane up|status|down|preview|env` and `fleetplane cluster up|status|down`: a fleet on
this machine.

`up` is the main job: the pinned tools, a real control plane with the local stack's fake GPU and
TPU nodes, a real `pulumi up` of the `local` stack, the OPA gate on loopback, Prometheus, and
one controller pass; it prints the fleet. `cluster` runs only the control plane and fake nodes.
"""

from __future__ import annotations

import argparse
import contextlib
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

EXIT_CODES = (
    "exit status: 0 done; 2 a part could not start or is not running (the message says which)."
)


def add_parser(subparsers: Any) -> None:
    """Add the local fleet's commands to a command line's subparsers."""
    state = argparse.ArgumentParser(add_help=False)
    state.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="cluster, Pulumi backend and PULUMI_HOME (default: .fleet in the checkout)",
    )
    state.add_argument(
        "--config-file", type=Path, help="stack configuration instead of stacks/Pulumi.local.yaml"
    )

    def command(name: str, help: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = subparsers.add_parser(
            name, parents=[state], help=help, description=f"{help}. {EXIT_CODES}"
        )
        parser.set_defaults(run=run_stack, stack_command=name)
        return parser

    up = command(
        "up",
        "the main job: start the local fleet, `pulumi up` the local stack, start the gate, "
        "run a controller pass, print the fleet",
    )
    up.add_argument("--no-controller", action="store_true", help="skip the controller pass")
    up.add_argument(
        "--real-node",
        action="store_true",
        help="also start a real node (containerd, kubelet, kube-proxy) and run OPA and the "
        "controller in the cluster from the images of `fleetplane image build` (root)",
    )
    up.add_argument(
        "--no-scenario",
        action="store_true",
        help="skip the two-minute scenario (teams submit work, the controller warns, reclaims "
        "and preempts, the gate refuses) after the first pass",
    )
    preview = command("preview", "`pulumi preview --diff` of the local stack on the running fleet")
    preview.add_argument("extra", nargs="*", help="more `pulumi preview` arguments (after --)")
    command("status", "the fleet, quotas, spend and gate of the running local stack")
    command("env", "print shell exports to run `pulumi` and `kubectl` on the local stack by hand")
    down = command("down", "`pulumi destroy`, then stop OPA, Prometheus and the control plane")
    down.add_argument("--keep", action="store_true", help="keep the cluster's data and logs")

    cluster: argparse.ArgumentParser = subparsers.add_parser(
        "cluster",
        help="only the local control plane with fake GPU/TPU nodes (no stack)",
        description="A real local Kubernetes control plane (etcd, kube-apiserver, "
        f"controller-manager, scheduler) with KWOK fake GPU/TPU nodes. {EXIT_CODES}",
    )
    cluster.add_argument(
        "--dir", type=Path, default=None, help="state directory (default: .fleet/local)"
    )
    actions = cluster.add_subparsers(dest="cluster_command", required=True, metavar="ACTION")
    actions.add_parser("up", help="start detached, create the fake fleet, print the inventory")
    actions.add_parser("status", help="show whether the cluster runs, and its inventory")
    cluster_down = actions.add_parser(
        "down", help="stop every process and remove the state directory"
    )
    cluster_down.add_argument(
        "--keep", action="store_true", help="keep the state directory (etcd data, logs)"
    )
    cluster.set_defaults(run=run_cluster)


@contextlib.contextmanager
def _reporting(prefix: str) -> Iterator[None]:
    """A part that cannot start or is not running: one line on stderr, exit status 2."""
    from localfleet.binaries import ROOT
    from localfleet.controlplane import ClusterError
    from localfleet.stack import StackError

    if not (ROOT / "Pulumi.yaml").is_file() or not (ROOT / "tools").is_dir():
        print(
            f"{prefix}: the local fleet runs from a checkout of fleetplane (it builds the pinned "
            "tools and runs the `local` stack there): clone the repository and run `make up`",
            file=sys.stderr,
        )
        raise SystemExit(2)
    try:
        yield
    except (StackError, ClusterError) as error:
        print(f"{prefix}: {error}", file=sys.stderr)
        raise SystemExit(2) from None


def run_stack(args: argparse.Namespace) -> int:
    from localfleet.stack import ALERTMANAGER_PORT, STATE_DIR, LocalStack

    def log(message: str) -> None:
        print(f"[fleetplane] {message}", flush=True)

    state_dir = (args.state_dir or STATE_DIR).resolve()
    with _reporting("fleetplane " + args.stack_command):
        stack = LocalStack(
            state_dir=state_dir,
            config_file=args.config_file,
            log=log,
            real_node=getattr(args, "real_node", False),
            # the main job's Alertmanager at its usual port; another state dir, another stack
            alertmanager_port=ALERTMANAGER_PORT if args.state_dir is None else 0,
        )
        if args.stack_command == "env":
            for key, value in stack.env().items():
                print(f"export {key}={shlex.quote(value)}")
            print(f"export KUBECONFIG={shlex.quote(str(stack.cluster_dir / 'kubeconfig'))}")
            return 0
        if args.stack_command == "up":
            print(stack.up(controller=not args.no_controller, scenario=not args.no_scenario))
        elif args.stack_command == "preview":
            stack.preview(*args.extra)
        elif args.stack_command == "status":
            print(stack.status())
        else:
            stack.down(keep=args.keep)
    return 0


def run_cluster(args: argparse.Namespace) -> int:
    import shutil
    import time

    from localfleet.controlplane import (
        DEFAULT_STATE_DIR,
        LocalCluster,
        format_inventory,
        inventory,
    )
    from localfleet.fakenodes import default_pools, fake_nodes

    def log(message: str) -> None:
        print(f"[cluster] {message}", flush=True)

    directory = args.dir or DEFAULT_STATE_DIR
    cluster = LocalCluster(data_dir=directory, keep=True, detach=True, log=log)
    with _reporting("fleetplane cluster"):
        if args.cluster_command == "up":
            if cluster.running_pids():
                log(f"already running (kubeconfig {cluster.kubeconfig})")
            else:
                if directory.exists():
                    shutil.rmtree(directory)
                started = time.monotonic()
                cluster.start()
                cluster.create_nodes(fake_nodes(default_pools()))
                log(f"control plane and fleet up in {time.monotonic() - started:.1f}s")
            print(format_inventory(inventory(cluster.get_json("nodes")["items"])))
            print(f"\nexport KUBECONFIG={cluster.kubeconfig}")
            return 0
        if args.cluster_command == "status":
            running = cluster.running_pids()
            if not running:
                print("not running")
                return 2
            print("running: " + ", ".join(f"{name} ({pid})" for name, pid in running.items()))
            print(format_inventory(inventory(cluster.get_json("nodes")["items"])))
            return 0
        cluster.keep = args.keep
        if not cluster.running_pids() and not directory.exists():
            log("not running")
            return 0
        cluster.stop()
        log("stopped" + (f"; data kept in {directory}" if args.keep else ""))
        return 0
