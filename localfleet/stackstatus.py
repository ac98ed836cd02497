"""What `fleetplane up` ends with and `fleetplane status` prints: the fleet's accelerators,
each team's quota and spend, the gate as its webhook is declared, the services and where their
logs are; and the live view (queues, pending workloads and why, recent controller actions)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any

from localfleet.controlplane import ClusterError, format_inventory, inventory
from localfleet.hostcontroller import HostController
from localfleet.stacklayout import StackLayout, loopback
from localfleet.stackservices import StackServices


def describe_namespace_selector(selector: dict[str, Any]) -> str:
    """Which namespaces a webhook's namespaceSelector lets it judge, in words."""
    parts: list[str] = []
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = ", ".join(expression.get("values") or [])
        if key == "kubernetes.io/metadata.name" and operator == "NotIn":
            parts.append(f"every namespace but {values}")
        elif key == "kubernetes.io/metadata.name" and operator == "In":
            parts.append(f"namespaces {values}")
        elif operator in ("Exists", "DoesNotExist"):
            parts.append(f"namespaces where label {key} {operator.lower()}")
        else:
            parts.append(f"namespaces whose label {key} is {operator} [{values}]")
    parts += [f"namespaces labelled {key}={value}" for key, value in
              sorted((selector.get("matchLabels") or {}).items())]  # fmt: skip
    return " and ".join(parts) or "every namespace"


@dataclass
class StackStatus:
    """The status of the stack of `layout`, its services and its controller."""

    layout: StackLayout
    services: StackServices
    controller: HostController

    def logs(self) -> str:
        """The last line of `up` and `status`: where the processes' logs are (the
        controller's JSON lines among them), as they are not printed."""
        where = [
            self.layout.services_dir / "*" / "*.log",
            self.controller.reconcile_log,
            self.controller.actions_file,
            self.layout.cluster_dir / "logs",
        ]
        return "logs: " + ", ".join(str(path) for path in where)

    def summary(self, controller_exit: int | None = None) -> str:
        fleet = self.layout.fleet()
        cluster = self.layout.cluster
        lines = [format_inventory(inventory(cluster.get_json("nodes")["items"])), ""]
        queues = {
            q["metadata"]["name"]: q
            for q in cluster.get_json("queues.scheduling.volcano.sh")["items"]
        }
        spend = self.spend(fleet)
        lines.append(
            f"{'TEAM':12} {'NAMESPACES':24} {'QUEUE (allocated/capability)':36} {'SPEND (month)'}"
        )
        for team in fleet.teams:
            namespaces = team.effective_namespaces
            queue = queues.get(team.name, {})
            allocated = queue.get("status", {}).get("allocated", {}) or {}
            capability = queue.get("spec", {}).get("capability", {}) or {}
            used = [
                f"{resource} {allocated.get(resource, '0')}/{hard}"
                for resource, hard in sorted(capability.items())
                if str(hard) != "0"
            ]
            spent = spend.get(team.name, {}).get("usd")
            money = (
                f"${spent:,.2f} of ${team.monthly_budget_usd:,.0f}"
                if isinstance(spent, int | float)
                else f"- of ${team.monthly_budget_usd:,.0f}"
            )
            lines.append(
                f"{team.name:12} {','.join(namespaces):24} {', '.join(used) or '-':36} {money}"
            )
        lines += ["", self.gate_status(fleet)]
        running = self.layout.volcano.running_pids()
        lines.append(
            f"volcano {fleet.volcano.chart_version}: "
            + (", ".join(f"{name} ({pid})" for name, pid in running.items()) or "not running")
        )
        lines.append(self.placement_status(fleet))
        exporter = self.services.exporter_address()
        lines.append(
            f"dcgm-exporter stand-in: {'http://' + exporter + '/metrics' if exporter else 'not running'}"
            f", scraped by Prometheus at {fleet.controller.prometheus_url}"
        )
        alertmanager = self.services.alertmanager_address()
        lines.append(
            f"alertmanager: {'http://' + alertmanager if alertmanager else 'not running'}"
            f" (the rule set's alerts, from Prometheus)"
        )
        for cluster_config in fleet.clusters:
            if not cluster_config.helm_charts:
                lines.append(
                    f"helm charts: off in cluster {cluster_config.name!r} (offline): the GPU "
                    "Operator is not installed (fake nodes carry its labels); Volcano runs as "
                    "local processes of the same release"
                )
        if controller_exit is not None:
            state = "ok" if controller_exit == 0 else f"failed (exit {controller_exit})"
            lines.append(f"controller: one reconcile pass {state}")
        keeper = self.controller.admission_keeper.pid()
        lines.append(
            f"admission keeper: {'running (' + str(keeper) + ')' if keeper else 'not running'}"
            f" (reservations as pods are created; log {self.controller.admission_keeper.log_path})"
        )
        lines += [
            "",
            f"export KUBECONFIG={self.layout.cluster_dir / 'kubeconfig'}",
            'eval "$(fleetplane env)"   # then: pulumi preview --diff --stack ' + self.layout.stack,
        ]
        return "\n".join(lines)

    def placement_status(self, fleet: Any) -> str:
        """How the scheduler places (`volcano.placement`, default fgd when the service is at
        hand) and, with fgd, whether the service it calls runs."""
        volcano = fleet.volcano
        if volcano.placement != "fgd":
            return "placement: volcano (Volcano's own scores)"
        url = volcano.placement_url
        if url is None or not loopback(url):
            return f"placement: fgd, the placement service at {url or 'in the cluster'}"
        pid = self.services.placement.pid()
        served = f"running ({pid})" if pid else "not running: Volcano's own scores meanwhile"
        return f"placement: fgd, the placement service at {url} {served}"

    def spend(self, fleet: Any) -> dict[str, Any]:
        url = fleet.controller.opa_url
        if not url or self.services.opa.pid() is None:
            return {}
        try:
            # OPA answers data reads only to the controller's token (policies/system/authz.rego)
            token = self.controller.controller_token().read_text().strip()
            request = urllib.request.Request(
                f"{url}/v1/data/fleetplane/spend", headers={"Authorization": f"Bearer {token}"}
            )
            with urllib.request.urlopen(request, timeout=5) as answer:
                result = json.loads(answer.read()).get("result")
        except (urllib.error.URLError, OSError, ValueError, KeyError, ClusterError):
            return {}
        return result if isinstance(result, dict) else {}

    def gate_status(self, fleet: Any) -> str:
        found = self.layout.cluster.kubectl(
            "get", "validatingwebhookconfiguration", fleet.opa.name, "-o", "json", check=False
        )
        if found.returncode != 0:
            return "policy gate: no webhook declared"
        (hook,) = json.loads(found.stdout)["webhooks"]
        target = hook["clientConfig"].get("url") or "the in-cluster OPA Service"
        state = "OPA not running"
        if fleet.opa.deploy and fleet.opa.external_url is None:
            found = self.layout.cluster.kubectl(
                "get", "deployment", fleet.opa.name, "-n", fleet.system_namespace, "-o", "json",
                check=False,
            )  # fmt: skip
            if found.returncode == 0:
                ready = json.loads(found.stdout).get("status", {}).get("readyReplicas", 0)
                state = f"OPA {ready}/{fleet.opa.replicas} replicas ready in the cluster"
        elif self.services.gate_healthy():
            state = "OPA healthy"
        # what the webhook is declared to judge, read from it (components/policy_gate.py:
        # every namespace but the platform's own, teams' or not)
        judged = describe_namespace_selector(hook.get("namespaceSelector") or {})
        return (
            f"policy gate: enforcing on {judged}, webhook -> "
            f"{target} (failurePolicy {hook['failurePolicy']}), {state}"
        )

    def live(self) -> str:
        """Queues, pending workloads and why they wait, recent controller actions."""
        from localfleet.scenario import pending_reason

        fleet = self.layout.fleet()
        cluster = self.layout.cluster
        queues = cluster.get_json("queues.scheduling.volcano.sh")["items"]
        total_weight = sum(q.get("spec", {}).get("weight", 1) for q in queues) or 1
        lines = [
            "",
            f"{'QUEUE':12} {'STATE':8} {'ALLOCATED':28} {'DESERVED':18} CAPABILITY",
        ]
        for queue in sorted(queues, key=lambda q: q["metadata"]["name"]):
            spec, status = queue.get("spec", {}), queue.get("status", {})
            allocated = {
                k: v
                for k, v in (status.get("allocated") or {}).items()
                if k.startswith(("nvidia", "google"))
            }
            # Volcano's proportion plugin derives each queue's deserved share from the weights
            deserved = f"{spec.get('weight', 1) / total_weight:.0%} (weight)"
            capability = {k: v for k, v in (spec.get("capability") or {}).items() if str(v) != "0"}
            lines.append(
                f"{queue['metadata']['name']:12} {status.get('state', '-'):8} "
                f"{json.dumps(allocated) if allocated else '-':28} {deserved!s:18} "
                f"{json.dumps(capability) if capability else '-'}"
            )
        team_namespaces = {ns for team in fleet.teams for ns in team.effective_namespaces}
        pending = [
            p
            for p in cluster.get_json("pods", "-A", "--field-selector=status.phase=Pending")[
                "items"
            ]
            if p["metadata"]["namespace"] in team_namespaces and not p["spec"].get("nodeName")
        ]
        lines += ["", f"pending workloads ({len(pending)}):"]
        lines += [
            f"  {p['metadata']['namespace']}/{p['metadata']['name']}: {pending_reason(p)}"
            for p in pending
        ] or ["  (none)"]
        actions_file = self.controller.actions_file
        recent = actions_file.read_text().splitlines()[-12:] if actions_file.exists() else []
        lines += ["", "recent controller actions:"]
        for line in recent:
            entry = json.loads(line)
            if entry["event"] != "spend.publish":
                lines.append(
                    f"  {entry['at'][:19]} {entry['event']:14} {entry['target']}: {entry['reason'][:160]}"
                )
        if len(lines) and lines[-1] == "recent controller actions:":
            lines.append("  (none)")
        return "\n".join(lines)
