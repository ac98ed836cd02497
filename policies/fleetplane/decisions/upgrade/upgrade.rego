# METADATA
# title: Upgrade decision
# description: >-
#   May the controller start a GPU driver upgrade on this node now? Allowed
#   only on explicit evidence: the node belongs to the named, configured pool,
#   now is inside a maintenance window, and fewer nodes of the pool are
#   unavailable than the pool's max_unavailable.
package fleetplane.decisions.upgrade

import data.fleetplane.config
import data.fleetplane.lib
import data.fleetplane.lib.workloads

# METADATA
# entrypoint: true
# description: '{"allow": bool, "reasons": [string]}, the answer the controller acts on.'
decision := {"allow": allow, "reasons": reasons}

default allow := false

allow if {
	count(input_problems) == 0
	every check in required_checks {
		check in passed
	}
}

reasons := sort([r | some r in evidence]) if {
	allow
} else := sort([p | some p in input_problems]) if {
	count(input_problems) > 0
} else := sort([failure(check) |
	some check in required_checks
	not check in passed
	not blocked(check)
])

# An unknown pool has no max_unavailable to judge; say it once.
prerequisites := {"unavailable": {"pool_known"}}

blocked(check) if {
	some prerequisite in prerequisites[check]
	not prerequisite in passed
}

# ------------------------------------------------------------------ input

# Negation only ever applies to rules without arguments, to calls on defined
# values, or to equality, so a missing field makes a check fail, never vanish.
input_problems contains "input must be an object" if not input_is_object

input_problems contains "input.node must be a Node object with metadata" if not valid_node

input_problems contains "input.pool must be a non-empty string" if not valid_pool_name

input_problems contains sprintf("input.%s must be a non-negative integer", [field]) if {
	input_is_object
	some field in ["pool_nodes", "pool_unavailable", "now"]
	not workloads.is_whole(object.get(input, field, null))
}

input_is_object if is_object(input)

valid_node if is_object(input.node.metadata)

valid_pool_name if workloads.non_empty_string(input.pool)

input_problems contains "input.pool_unavailable must not exceed input.pool_nodes" if input.pool_unavailable > input.pool_nodes

# ----------------------------------------------------------------- facts

pool := config.pools[input.pool]

node_labels := workloads.as_object(object.get(workloads.as_object(input.node.metadata), "labels", {}))

# METADATA
# description: >-
#   Nodes of the pool that may be unavailable at once. An integer is taken as
#   is; "N%" is N percent of pool_nodes rounded up (so a small pool can still
#   progress); either way at least 1, so an upgrade can always proceed one
#   node at a time.
max_unavailable(value, _) := max({value, 1}) if workloads.is_whole(value)

max_unavailable(value, nodes) := max({ceil((percent * nodes) / 100), 1}) if {
	is_string(value)
	regex.match(`^(0|[1-9][0-9]*)%$`, value)
	percent := to_number(trim_suffix(value, "%"))
}

allowed_unavailable := max_unavailable(pool.max_unavailable, input.pool_nodes)

# ------------------------------------------------------- maintenance window

days := ["sun", "mon", "tue", "wed", "thu", "fri", "sat"]

weekday_index := {"Sunday": 0, "Monday": 1, "Tuesday": 2, "Wednesday": 3, "Thursday": 4, "Friday": 5, "Saturday": 6}

# Day (index into days) and minute of the day of now, in a window's time zone
# (UTC unless the window names one).
local_time(window, now) := [weekday_index[time.weekday(at)], (hour * 60) + minute] if {
	at := [now * 1000000000, object.get(window, "timezone", "UTC")]
	[hour, minute, _] := time.clock(at)
}

minutes(hhmm) := (to_number(parts[0]) * 60) + to_number(parts[1]) if {
	is_string(hhmm)
	regex.match(`^([01][0-9]|2[0-3]):[0-5][0-9]$`, hhmm)
	parts := split(hhmm, ":")
}

# METADATA
# description: >-
#   True when now is inside the window. Both ends are inclusive to the
#   minute ("23:59" lasts until 23:59:59). A window whose end is before its
#   start runs overnight and belongs to the day it starts on.
in_window(window, now) if {
	[day, minute] := local_time(window, now)
	start := minutes(window.start)
	end := minutes(window.end)
	start <= end
	days[day] in window.days
	minute >= start
	minute <= end
}

in_window(window, now) if {
	[day, minute] := local_time(window, now)
	start := minutes(window.start)
	end := minutes(window.end)
	start > end
	days[day] in window.days
	minute >= start
}

in_window(window, now) if {
	[day, minute] := local_time(window, now)
	start := minutes(window.start)
	end := minutes(window.end)
	start > end
	days[(day + 6) % 7] in window.days
	minute <= end
}

# ----------------------------------------------------------------- checks

required_checks := {"pool_known", "node_in_pool", "maintenance_window", "unavailable"}

passed contains "pool_known" if is_object(pool)

passed contains "node_in_pool" if node_labels[lib.keys.pool] == input.pool

passed contains "maintenance_window" if {
	some window in config.upgrade.maintenance_windows
	in_window(window, input.now)
}

passed contains "unavailable" if input.pool_unavailable < allowed_unavailable

# ---------------------------------------------------------------- reasons

failures["pool_known"] := sprintf("pool %q is not configured", [input.pool])

failures["node_in_pool"] := sprintf(
	"the node's %s label is %s, not %q",
	[lib.keys.pool, json.marshal(object.get(node_labels, lib.keys.pool, null)), input.pool],
)

failures["maintenance_window"] := sprintf(
	"%v is outside every maintenance window %s",
	[input.now, json.marshal(object.get(config, ["upgrade", "maintenance_windows"], null))],
)

failures["unavailable"] := sprintf(
	"%v of %v nodes of pool %s are unavailable; max_unavailable %s allows %v at once",
	[input.pool_unavailable, input.pool_nodes, input.pool, json.marshal(pool.max_unavailable), allowed_unavailable],
)

failures["unavailable"] := sprintf(
	"pool %s has max_unavailable %s; it must be a non-negative integer or a percentage like \"10%%\"",
	[input.pool, json.marshal(pool.max_unavailable)],
) if not allowed_unavailable

failure(check) := msg if {
	msg := failures[check]
} else := sprintf("check %s did not pass", [check])

evidence contains sprintf("node belongs to pool %s", [input.pool])

evidence contains sprintf("%v is inside a maintenance window", [input.now])

evidence contains sprintf(
	"%v of %v nodes unavailable, below max_unavailable %s = %v",
	[input.pool_unavailable, input.pool_nodes, json.marshal(pool.max_unavailable), allowed_unavailable],
)
