"""The cloud's own node upgrades, held to the fleet's upgrade rules.

GKE upgrades node images on its own (under a release channel node auto-upgrade cannot be
turned off), and on COS pools the NVIDIA driver comes with the image: left alone it drains GPU
and TPU nodes whenever it likes, around the controller's checkpoint-aware, gang-whole drains.
What holds it is a cluster setting, the maintenance policy: one recurring window (from
`upgrade.maintenance_windows`) and exclusions (from `upgrade.cloud_freezes`). fleetplane does
not own the GKE cluster (it adds node pools to an existing one), so `GkeUpgradePolicy` reads the
live cluster's policy, warns with the `gcloud` commands that set it when it differs, and exports
the policy for a program that declares the cluster (`GkeMaintenancePolicy.args()`).

Per pool, the surge settings come from the pool's `max_unavailable` (GKE node pools, EKS
managed node groups alike), so the cloud takes no more nodes out at once than the controller's
rollout may.
"""

from __future__ import annotations

import datetime as dt
import math
import shlex
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws
import pulumi_gcp as gcp

from fleet.config import ClusterConfig, FleetConfig, PoolConfig, UpgradeConfig

BYDAY = {"mon": "MO", "tue": "TU", "wed": "WE", "thu": "TH", "fri": "FR", "sat": "SA", "sun": "SU"}
NODE_UPGRADES_OFF = "NO_MINOR_OR_NODE_UPGRADES"
"""The exclusion scope that stops node upgrades (minor or patch) but lets control-plane
patches go on: those drain no node."""
WINDOW_FIRST_DAY = dt.date(2026, 1, 1)
"""GKE reads the window's start date as the first day it may recur, its end as the duration:
any past date serves; a fixed one keeps the declared policy from changing between runs."""


def _utc(moment: dt.datetime) -> str:
    # GKE answers in UTC with a Z: another spelling of the same instant is a permanent diff.
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class GkeExclusion:
    name: str
    start_time: str
    end_time: str
    scope: str = NODE_UPGRADES_OFF


@dataclass(frozen=True)
class GkeMaintenancePolicy:
    """A GKE cluster's maintenance policy: one weekly recurring window and its exclusions."""

    start_time: str
    end_time: str
    recurrence: str
    exclusions: tuple[GkeExclusion, ...] = ()

    def args(self) -> gcp.container.ClusterMaintenancePolicyArgs:
        """The `maintenance_policy` of a `gcp.container.Cluster` that declares it."""
        exclusions = [
            gcp.container.ClusterMaintenancePolicyMaintenanceExclusionArgs(
                exclusion_name=e.name,
                start_time=e.start_time,
                end_time=e.end_time,
                exclusion_options=gcp.container.ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                    scope=e.scope
                ),
            )
            for e in self.exclusions
        ]
        return gcp.container.ClusterMaintenancePolicyArgs(
            recurring_window=gcp.container.ClusterMaintenancePolicyRecurringWindowArgs(
                start_time=self.start_time, end_time=self.end_time, recurrence=self.recurrence
            ),
            maintenance_exclusions=exclusions or None,
        )

    def gcloud(self, cluster: ClusterConfig) -> list[str]:
        """The commands that set this policy on an existing cluster."""
        where = ["--location", cluster.region, "--project", cluster.project]
        base = ["gcloud", "container", "clusters", "update", cluster.remote_name, *where]
        window = {
            "--maintenance-window-start": self.start_time,
            "--maintenance-window-end": self.end_time,
            "--maintenance-window-recurrence": self.recurrence,
        }
        commands = [[*base, *_flags(window)]]
        for e in self.exclusions:
            exclusion = {
                "--add-maintenance-exclusion-name": e.name,
                "--add-maintenance-exclusion-start": e.start_time,
                "--add-maintenance-exclusion-end": e.end_time,
                "--add-maintenance-exclusion-scope": e.scope.lower(),
            }
            commands.append([*base, *_flags(exclusion)])
        return [shlex.join(c) for c in commands]

    def differences(self, live: Any) -> list[str]:
        """What the live cluster's policy (a `get_cluster` result's `maintenance_policies`)
        lacks of this one; empty when it keeps node upgrades at least as tight. Extra live
        exclusions only hold upgrades back further, so they are no difference."""
        policies = list(live or [])
        windows = list(_field(policies[0], "recurring_windows") or []) if policies else []
        if not windows:
            return ["no recurring maintenance window: GKE may upgrade nodes at any time"]
        found: list[str] = []
        window = windows[0]
        if _window_key(window) != _window_key(self):
            found.append(
                f"the recurring window is {_describe(window)}, the fleet's is {_describe(self)}"
            )
        live_exclusions = {
            _field(e, "exclusion_name"): e
            for e in _field(policies[0], "maintenance_exclusions") or []
        }
        for wanted in self.exclusions:
            have = live_exclusions.get(wanted.name)
            want = (_instant(wanted.start_time), _instant(wanted.end_time), wanted.scope)
            if have is None or _exclusion_key(have) != want:
                found.append(
                    f"exclusion {wanted.name!r} ({wanted.start_time} to {wanted.end_time}, "
                    f"{wanted.scope}) is missing or differs"
                )
        return found


def _flags(flags: dict[str, str]) -> list[str]:
    return [word for flag, value in flags.items() for word in (flag, value)]


def _field(value: Any, name: str) -> Any:
    """A field of a provider result, whether typed or a plain dict (as mocks return it)."""
    if isinstance(value, dict):
        camel = name.split("_")[0] + "".join(p.title() for p in name.split("_")[1:])
        return value.get(name, value.get(camel))
    return getattr(value, name, None)


def _instant(text: str | None) -> dt.datetime:
    """An RFC 3339 instant in UTC; a missing one (an exclusion until the end of support) is
    the end of time."""
    if not text:
        return dt.datetime.max.replace(tzinfo=dt.UTC)
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).astimezone(dt.UTC)


def _window_key(window: Any) -> tuple[dt.time, dt.timedelta, str]:
    """Time of day, length and recurrence: the start date is only the first day it may recur."""
    start, end = _instant(_field(window, "start_time")), _instant(_field(window, "end_time"))
    return start.time(), end - start, _normal_rrule(_field(window, "recurrence"))


def _normal_rrule(rule: str) -> str:
    parts = dict(p.split("=", 1) for p in rule.upper().split(";") if "=" in p)
    if "BYDAY" in parts:
        order = list(BYDAY.values())
        days = sorted(parts["BYDAY"].split(","), key=lambda d: order.index(d) if d in order else 9)
        parts["BYDAY"] = ",".join(days)
    return ";".join(f"{k}={parts[k]}" for k in sorted(parts))


def _describe(window: Any) -> str:
    time, length, rule = _window_key(window)
    return f"{rule} from {time:%H:%M} UTC for {length}"


def _exclusion_key(exclusion: Any) -> tuple[dt.datetime, dt.datetime, str]:
    """Start, end and scope of a live exclusion (one without options excludes everything)."""
    options = _field(exclusion, "exclusion_options")
    if isinstance(options, list):  # the data source's shape: a list of one
        options = options[0] if options else None
    scope = _field(options, "scope") if options is not None else "NO_UPGRADES"
    return (
        _instant(_field(exclusion, "start_time")),
        _instant(_field(exclusion, "end_time")),
        scope,
    )


def gke_maintenance_policy(upgrade: UpgradeConfig) -> GkeMaintenancePolicy:
    """The fleet's windows as GKE's one recurring window: every window shares start and end
    (`check_fleet` refuses a fleet with a GKE pool otherwise), their days are the RRULE's
    BYDAY. The fleet's end is inclusive to the minute (01:00-07:00 lasts until 07:00:59), so
    GKE's window ends a minute later, at 07:01: both start upgrades in the same minutes."""
    windows = upgrade.maintenance_windows
    times = {(w.start, w.end) for w in windows}
    if len(times) != 1:
        raise ValueError(
            "upgrade.maintenance_windows: a GKE cluster takes one recurring window; the "
            f"windows' start and end differ: {sorted(times)}"
        )
    ((start_clock, end_clock),) = times
    start = dt.datetime.combine(WINDOW_FIRST_DAY, dt.time.fromisoformat(start_clock), tzinfo=dt.UTC)
    end = dt.datetime.combine(WINDOW_FIRST_DAY, dt.time.fromisoformat(end_clock), tzinfo=dt.UTC)
    end += dt.timedelta(minutes=1)
    days = {day for w in windows for day in w.days}
    byday = ",".join(code for day, code in BYDAY.items() if day in days)
    exclusions = tuple(
        GkeExclusion(name=f.name, start_time=_utc(f.start), end_time=_utc(f.end))
        for f in upgrade.cloud_freezes
    )
    return GkeMaintenancePolicy(
        start_time=_utc(start),
        end_time=_utc(end),
        recurrence=f"FREQ=WEEKLY;BYDAY={byday}",
        exclusions=exclusions,
    )


def pool_max_unavailable(pool: PoolConfig) -> int:
    """The pool's `max_unavailable` as a node count: a percentage of the pool at its largest,
    rounded up, as the controller rounds it; at least 1."""
    value = pool.max_unavailable
    if isinstance(value, int):
        return max(value, 1)
    return max(math.ceil(int(value.rstrip("%")) * pool.max_nodes / 100), 1)


def gke_upgrade_settings(pool: PoolConfig) -> gcp.container.NodePoolUpgradeSettingsArgs:
    """Surge without extra nodes (accelerator capacity is scarce, and a surge node may not
    exist): GKE takes `max_unavailable` nodes at a time, never more than the controller may."""
    return gcp.container.NodePoolUpgradeSettingsArgs(
        strategy="SURGE", max_surge=0, max_unavailable=pool_max_unavailable(pool)
    )


def eks_update_config(pool: PoolConfig) -> aws.eks.NodeGroupUpdateConfigArgs:
    """EKS takes a count or a percentage as given, and resolves the percentage itself."""
    if isinstance(pool.max_unavailable, str):
        return aws.eks.NodeGroupUpdateConfigArgs(
            max_unavailable_percentage=int(pool.max_unavailable.rstrip("%"))
        )
    return aws.eks.NodeGroupUpdateConfigArgs(max_unavailable=pool.max_unavailable)


@dataclass(frozen=True, kw_only=True)
class GkeUpgradePolicyArgs:
    """fleet: the validated fleet; cluster: a gcp cluster with pools; provider: its gcp
    provider (None: the default provider)."""

    fleet: FleetConfig
    cluster: ClusterConfig
    provider: pulumi.ProviderResource | None = None


class GkeUpgradePolicy(pulumi.ComponentResource):
    """The maintenance policy a GKE cluster needs for the fleet's windows, held against the
    live cluster: a warning with the `gcloud` commands when the cluster's policy would let GKE
    start node upgrades outside the windows or inside a freeze. No cloud resource: the cluster
    is not the fleet's to change."""

    policy: GkeMaintenancePolicy
    differences: pulumi.Output[list[str]]

    def __init__(
        self, name: str, args: GkeUpgradePolicyArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("fleetplane:cloud:GkeUpgradePolicy", name, None, opts)
        cluster = args.cluster
        self.policy = gke_maintenance_policy(args.fleet.upgrade)
        commands = self.policy.gcloud(cluster)
        live = gcp.container.get_cluster_output(
            name=cluster.remote_name,
            location=cluster.region,
            project=cluster.project,
            opts=pulumi.InvokeOutputOptions(parent=self, provider=args.provider),
        )
        self.differences = live.maintenance_policies.apply(self.policy.differences)

        def warn(found: list[str]) -> list[str]:
            if found:
                pulumi.log.warn(
                    f"GKE cluster {cluster.remote_name!r} would upgrade GPU/TPU nodes outside "
                    f"the fleet's upgrade windows: {'; '.join(found)}. fleetplane does not own "
                    "the cluster; set its maintenance policy with:\n" + "\n".join(commands),
                    resource=self,
                )
            return found

        self.register_outputs(
            {
                "maintenance_policy": {
                    "recurring_window": {
                        "start_time": self.policy.start_time,
                        "end_time": self.policy.end_time,
                        "recurrence": self.policy.recurrence,
                    },
                    "maintenance_exclusions": [vars(e) for e in self.policy.exclusions],
                },
                "gcloud": commands,
                "differences": self.differences.apply(warn),
            }
        )
