"""The controller on the host, as the CronJob and the admission keeper's Deployment run it in a
cluster: with the rendered configuration, credentials, the gate's OPA and its token, and
Prometheus that their pods mount; or, with a real node, as a Job of the CronJob itself.

Its output is JSON lines for machines: they go to files under `<state_dir>/services/controller/`
(`reconcile.log` the last pass, `actions.jsonl` every decision so far), and the terminal gets one
line per pass that says where they are.
"""

from __future__ import annotations

import base64
import json
import os
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from localfleet.processes import Supervisor
from localfleet.stacklayout import StackError, StackLayout


@dataclass
class HostController:
    """The controller's passes and the admission keeper for the stack of `layout`."""

    layout: StackLayout

    @property
    def work_dir(self) -> Path:
        return self.layout.services_dir / "controller"

    @property
    def reconcile_log(self) -> Path:
        """The log of the last reconcile pass (JSON lines)."""
        return self.work_dir / "reconcile.log"

    @property
    def actions_file(self) -> Path:
        """Every decision of the stack's passes so far, one JSON object a line."""
        return self.work_dir / "actions.jsonl"

    @property
    def admission_keeper(self) -> Supervisor:
        return Supervisor(
            "admission-keeper", self.layout.services_dir / "admission-keeper", detached=True
        )

    def controller_config(self) -> Path:
        """The rendered configuration the CronJob mounts, read from its ConfigMap."""
        from fleet.render import CONFIG_FILE, CONTROLLER_NAME

        fleet = self.layout.fleet()
        configmap = self.layout.cluster.get_json(
            "configmap", f"{CONTROLLER_NAME}-config", "-n", fleet.system_namespace
        )
        path = self.work_dir / CONFIG_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(configmap["data"][CONFIG_FILE])
        return path

    def controller_kubeconfig(self) -> Path:
        """A kubeconfig whose client certificate names the CronJob's ServiceAccount, so the
        admission gate sees the controller's writes as the platform's (as in a cluster). It
        also carries system:masters: on the host the pass is not confined to the CronJob's
        RBAC (the RBAC tests impersonate the ServiceAccount)."""
        from components.controller_job import CONTROLLER_NAME
        from fleet.render import service_account
        from localfleet.pki import client_certificate, client_kubeconfig

        path = self.work_dir / "kubeconfig"
        pki = self.layout.cluster_dir / "pki"
        admin = json.loads((self.layout.cluster_dir / "kubeconfig").read_text())
        client_certificate(
            pki,
            "controller",
            common_name=service_account(self.layout.fleet().system_namespace, CONTROLLER_NAME),
            organization="system:masters",
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(
            client_kubeconfig(admin["clusters"][0]["cluster"]["server"], pki, "controller")
        )
        return path

    def controller_token(self) -> Path:
        """The controller's bearer token for OPA, read from the gate's Secret (as the CronJob
        mounts it) into a file only this user can read."""
        from fleet.opa import CONTROLLER_TOKEN_KEY
        from fleet.render import opa_controller_token_secret

        fleet = self.layout.fleet()
        secret = self.layout.cluster.get_json(
            "secret", opa_controller_token_secret(fleet), "-n", fleet.system_namespace
        )
        path = self.work_dir / "opa-token"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
        path.chmod(0o600)
        path.write_bytes(base64.b64decode(secret["data"][CONTROLLER_TOKEN_KEY]))
        return path

    def command(self, *command: str) -> list[str]:
        """`fleetplane controller <command>` with what the CronJob's pod mounts: the rendered
        configuration, credentials, the gate's OPA and its token, Prometheus."""
        fleet = self.layout.fleet()
        cmd = [
            sys.executable,
            "-m",
            "fleetplane",
            "controller",
            *command,
            "--config",
            str(self.controller_config()),
            "--kubeconfig",
            str(self.controller_kubeconfig()),
        ]
        if fleet.controller.opa_url:
            cmd += ["--opa-url", fleet.controller.opa_url]
        if fleet.opa.gate:
            cmd += ["--opa-token-file", str(self.controller_token())]
        return [*cmd, "--prometheus-url", fleet.controller.prometheus_url]

    def start_admission_keeper(self) -> None:
        """`fleetplane controller admission --watch` on the host, as its Deployment runs it in a
        cluster: reservations written as pods are created (controller/admission_keeper.py);
        ready at its first pass. `fleetplane down` stops it."""
        cmd = self.command("admission", "--watch")
        self.layout.log("$ " + shlex.join(["fleetplane", *cmd[3:]]) + " &")
        keeper = self.admission_keeper
        keeper.run(
            cmd,
            lambda: keeper.log_path.exists() and '"keeper.pass"' in keeper.log_path.read_text(),
            timeout=60,
            env={**os.environ, "PYTHONPATH": str(self.layout.root)},
        )

    def controller_pass(self) -> int | None:
        """One real `fleetplane controller reconcile` pass, as the CronJob runs it; its JSON
        log goes to `reconcile_log`, its decisions are added to `actions_file`."""
        cmd = self.command("reconcile")
        self.layout.log("$ " + shlex.join(["fleetplane", *cmd[3:]]))
        with open(self.reconcile_log, "w") as log:
            result = subprocess.run(
                cmd, cwd=self.layout.root, stdout=log, stderr=subprocess.STDOUT, timeout=600
            )
        text = self.reconcile_log.read_text(errors="replace")
        from localfleet.scenario import controller_actions

        decisions = controller_actions(text)
        with open(self.actions_file, "a") as actions:
            for decision in decisions:
                actions.write(json.dumps(decision.__dict__) + "\n")
        state = "ok" if result.returncode == 0 else f"failed (exit {result.returncode})"
        self.layout.log(
            f"  controller pass {state}: {len(decisions)} decision(s) (log: {self.reconcile_log})"
        )
        return result.returncode

    def controller_job(self, name: str, timeout: float = 600.0) -> tuple[int, str]:
        """One controller pass in the cluster: a Job created from the CronJob, as the schedule
        would create it; its exit status (0 complete, 1 failed) and its log."""
        from components.controller_job import CONTROLLER_NAME

        ns = self.layout.fleet().system_namespace
        cluster = self.layout.cluster
        cluster.kubectl("create", "job", name, f"--from=cronjob/{CONTROLLER_NAME}", "-n", ns)
        deadline = time.monotonic() + timeout
        while True:
            status = cluster.get_json("job", name, "-n", ns).get("status", {})
            done = {c["type"]: c["status"] for c in status.get("conditions", [])}
            if done.get("Complete") == "True" or done.get("Failed") == "True":
                break
            if time.monotonic() > deadline:
                raise StackError(f"controller Job {name} not finished after {timeout:.0f}s")
            time.sleep(1)
        logs = cluster.kubectl("logs", f"job/{name}", "-n", ns, check=False).stdout
        return (0 if done.get("Complete") == "True" else 1), logs

    def report(self, out: Path | None = None) -> int:
        """`fleetplane report` for the current month on the local Prometheus (after the main
        job: its controller pass has pushed the month's first metrics); the exit status."""
        from observability.cli import write_month_report

        fleet = self.layout.fleet()
        return write_month_report(
            fleet.controller.prometheus_url,
            fleet,
            None,
            out or self.layout.services_dir / "reports",
        )

    def month_report(self) -> str:
        """After the scenario: the month's chargeback from the local Prometheus, and where it
        is. A report that cannot be written is said, not raised: it must not undo the job."""
        out = self.layout.services_dir / "reports"
        try:
            status = self.report(out)
        except Exception as error:
            self.layout.log(f"chargeback report not written: {error}")
            return f"\nchargeback report: not written ({error})\n"
        said = "written" if status == 0 else f"incomplete (exit {status})"
        return f"\nchargeback report for this month, {said}: {out} (fleetplane report)\n"
