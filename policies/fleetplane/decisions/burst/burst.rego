# METADATA
# title: Burst decision
# description: >-
#   May a team's waiting work burst to the next, more expensive capacity tier?
#   Tiers in order: reserved (reserved or committed pools), on-demand, spot.
#   Allowed only to the next tier the workload type may run on (its capacity:
#   any, on-demand, spot; a type that must checkpoint on spot must declare a
#   checkpoint location), while the team's month-to-date spend, reservations
#   and the burst's estimate stay at or under its budget's warning line
#   (data.fleetplane.budget verdict "ok"), and, when the work declares a data
#   residency (label fleetplane.dev/data-residency), only to a pool whose
#   region is in it. Missing or malformed input never allows.
package fleetplane.decisions.burst

import data.fleetplane.budget
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
	every check in checks {
		check in passed
	}
}

reasons := [evidence] if {
	allow
} else := sort([p | some p in input_problems]) if {
	count(input_problems) > 0
} else := sort([failures[c] | some c in checks; not c in passed])

residency_label := "fleetplane.dev/data-residency"

tiers := ["reserved", "on-demand", "spot"]

checks := {"waiting", "next_tier", "checkpoint", "headroom", "residency"}

# ------------------------------------------------------------------ input

input_problems contains "input must be an object" if not is_object(input)

input_problems contains "input.team must be a team of the configuration" if {
	is_object(input)
	not known_team
}

known_team if is_object(config.teams[input.team])

input_problems contains "input.workload_type must be a known workload type" if {
	is_object(input)
	not known_type
}

known_type if is_object(config.workload_types[input.workload_type])

input_problems contains sprintf("input.%s must be one of %s", [field, concat(", ", tiers)]) if {
	is_object(input)
	some field in ["from_tier", "to_tier"]
	not object.get(input, field, null) in tiers
}

input_problems contains "input.pod must be a Pod object with metadata" if {
	is_object(input)
	not is_object(object.get(input, ["pod", "metadata"], null))
}

input_problems contains sprintf("input.%s must be a non-negative number", [field]) if {
	is_object(input)
	some field in ["estimate_usd", "pending_seconds", "now"]
	not non_negative(object.get(input, field, null))
}

input_problems contains "input.to_pool must be {name, region}" if {
	is_object(input)
	not pool_well_formed
}

pool_well_formed if {
	workloads.non_empty_string(object.get(input.to_pool, "name", null))
	is_string(object.get(input.to_pool, "region", null))
}

non_negative(x) if {
	is_number(x)
	x >= 0
}

# ----------------------------------------------------------------- facts

metadata := workloads.as_object(input.pod.metadata)

labels := workloads.as_object(object.get(metadata, "labels", {}))

annotations := workloads.as_object(object.get(metadata, "annotations", {}))

type_config := config.workload_types[input.workload_type]

# The tiers the type may run on: reserved always (it is the team's own
# capacity), then what its capacity allows.
may_use("reserved") := true

may_use("on-demand") if type_config.capacity in {"any", "on-demand"}

may_use("spot") if type_config.capacity in {"any", "spot"}

index_of(tier) := i if tiers[i] == tier

# The first tier after from_tier the type may use.
next_tier := tiers[min({i |
	some i, tier in tiers
	i > index_of(input.from_tier)
	may_use(tier)
})]

verdict := budget.verdict(input.team, input.workload_type, input.estimate_usd, input.now * 1000000000, [])

residency := labels[residency_label]

# A region is in a residency when it is the residency or starts with it and
# a dash: "eu" holds eu-west-1, "europe" holds europe-west4.
in_residency(region, declared) if region == declared

in_residency(region, declared) if startswith(region, concat("", [declared, "-"]))

# ----------------------------------------------------------------- checks

passed contains "waiting" if input.pending_seconds > 0

passed contains "next_tier" if input.to_tier == next_tier

passed contains "checkpoint" if input.to_tier != "spot"

passed contains "checkpoint" if {
	input.to_tier == "spot"
	not type_config.checkpoint_required_on_spot
}

passed contains "checkpoint" if {
	input.to_tier == "spot"
	type_config.checkpoint_required_on_spot
	workloads.non_empty_string(object.get(annotations, lib.keys.checkpoint_location, null))
}

passed contains "headroom" if verdict.level == "ok"

passed contains "residency" if not labels[residency_label]

passed contains "residency" if in_residency(input.to_pool.region, residency)

# ---------------------------------------------------------------- reasons

failures["waiting"] := "the work is not waiting"

failures["next_tier"] := sprintf(
	"%s is not the next tier after %s that %s may use (%s; capacity %s)",
	[input.to_tier, input.from_tier, input.workload_type, next_text, type_config.capacity],
)

next_text := t if {
	t := next_tier
} else := "none"

failures["checkpoint"] := sprintf(
	"%s must declare %s to run on spot",
	[input.workload_type, lib.keys.checkpoint_location],
)

failures["headroom"] := sprintf(
	"team %s has no budget headroom for the burst: %s",
	[input.team, headroom_text],
)

failures["residency"] := sprintf(
	"pool %s is in region %s, outside the work's data residency %s",
	[input.to_pool.name, json.marshal(input.to_pool.region), residency],
)

headroom_text := sprintf(
	"spent %v, reserved %v and %v for the burst is past the %v warning line of its %v budget",
	[verdict.spent_usd, verdict.reserved_usd, input.estimate_usd, config.budget.warn_ratio, verdict.budget_usd],
) if {
	verdict.level
} else := "its spend or reservations are malformed"

evidence := sprintf(
	"%s may burst from %s to %s on pool %s: %v USD of headroom used of %v (warning line %v)",
	[input.team, input.from_tier, input.to_tier, input.to_pool.name, verdict.total_usd, verdict.budget_usd, config.budget.warn_ratio],
)
