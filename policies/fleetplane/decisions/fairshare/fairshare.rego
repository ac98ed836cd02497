# METADATA
# title: Fair-share reclaim decision
# description: >-
#   May the controller take this running pod (the victim) back from its team so
#   that a team under its deserved share (the claimant) can run its waiting
#   work? Allowed only on explicit evidence: the claimant is another team and
#   holds less than its deserved share of the pool, the victim's queue is
#   reclaimable, the victim is preemptible, not exempt, has run its minimum
#   runtime and holds accelerators, and its team still holds at least its own
#   deserved share of the pool after losing it (with its gang).
package fleetplane.decisions.fairshare

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
])

# ------------------------------------------------------------------ input

claimant := input.claimant

victim := input.victim

input_problems contains "input must be an object" if not is_object(input)

input_problems contains sprintf("input.%s must be an object", [side]) if {
	is_object(input)
	some side in ["claimant", "victim", "pool"]
	not is_object(object.get(input, side, null))
}

input_problems contains sprintf("input.%s.pod must be a Pod object with metadata", [side]) if {
	some side in ["claimant", "victim"]
	is_object(object.get(input, side, null))
	not is_object(object.get(input[side], ["pod", "metadata"], null))
}

input_problems contains sprintf("input.%s must be a number", [path]) if {
	some side, fields in numbers
	is_object(object.get(input, side, null))
	some name in fields
	not is_number(object.get(input[side], name, null))
	path := concat(".", [side, name])
}

input_problems contains "input.victim.workload_type must be a known workload type" if {
	is_object(object.get(input, "victim", null))
	not config.workload_types[object.get(victim, "workload_type", "")]
}

input_problems contains "input.victim.queue_reclaimable must be a boolean" if {
	is_object(object.get(input, "victim", null))
	not is_boolean(object.get(victim, "queue_reclaimable", null))
}

numbers := {
	"claimant": ["held", "deserved"],
	"victim": ["running_seconds", "devices", "team_held", "team_deserved"],
}

# ----------------------------------------------------------------- facts

team_of(pod) := config.namespaces[pod.metadata.namespace]

claimant_team := team_of(claimant.pod)

victim_team := team_of(victim.pod)

victim_labels := workloads.as_object(object.get(workloads.as_object(victim.pod.metadata), "labels", {}))

victim_type := config.workload_types[victim.workload_type]

# METADATA
# description: >-
#   Whether the victim may be taken at all: its preemptible label
#   ("true"/"false") wins, otherwise the workload type's default.
victim_preemptible if victim_labels[lib.keys.preemptible] == "true"

victim_preemptible if {
	not victim_labels[lib.keys.preemptible]
	victim_type.preemptible == true
}

# ----------------------------------------------------------------- checks

required_checks := {
	"other_team", "claimant_under_share", "reclaimable", "preemptible",
	"not_exempt", "min_runtime", "holds_accelerators", "keeps_share",
}

passed contains "other_team" if {
	claimant_team != victim_team
}

passed contains "claimant_under_share" if claimant.held < claimant.deserved

passed contains "reclaimable" if victim.queue_reclaimable == true

passed contains "preemptible" if victim_preemptible

passed contains "not_exempt" if not victim_labels[lib.keys.exempt] == "true"

passed contains "min_runtime" if victim.running_seconds >= victim_type.min_runtime_seconds

passed contains "holds_accelerators" if victim.devices > 0

passed contains "keeps_share" if victim.team_held - victim.devices >= victim.team_deserved

# ---------------------------------------------------------------- reasons

failures["other_team"] := msg if {
	not claimant_team
	msg := sprintf("the claimant's namespace %q belongs to no team", [object.get(claimant.pod.metadata, "namespace", "")])
}

failures["other_team"] := msg if {
	claimant_team
	not victim_team
	msg := sprintf("the victim's namespace %q belongs to no team", [object.get(victim.pod.metadata, "namespace", "")])
}

failures["other_team"] := sprintf("both belong to team %s: fair share is between teams", [victim_team]) if {
	claimant_team == victim_team
}

failures["claimant_under_share"] := sprintf(
	"team %s holds %v, not less than its deserved share %v",
	[object.get(claimant, "team", "?"), claimant.held, claimant.deserved],
)

failures["reclaimable"] := sprintf("the queue of team %s is not reclaimable", [object.get(victim, "team", "?")])

failures["preemptible"] := sprintf(
	"the victim is not preemptible (label %s=%s, %s default %v)",
	[lib.keys.preemptible, object.get(victim_labels, lib.keys.preemptible, "<unset>"), victim.workload_type, object.get(victim_type, "preemptible", null)],
)

failures["not_exempt"] := sprintf("the victim is labelled %s=true", [lib.keys.exempt])

failures["min_runtime"] := sprintf(
	"the victim has run %vs, less than the %vs minimum for %s",
	[victim.running_seconds, victim_type.min_runtime_seconds, victim.workload_type],
)

failures["holds_accelerators"] := "the victim holds no accelerators, so taking it back frees none"

failures["keeps_share"] := sprintf(
	"team %s would fall below its deserved share %v (holds %v, the victim and its gang hold %v)",
	[object.get(victim, "team", "?"), victim.team_deserved, victim.team_held, victim.devices],
)

failure(check) := msg if {
	msg := failures[check]
} else := sprintf("check %s did not pass", [check])

evidence contains sprintf(
	"team %s holds %v, under its deserved share %v, and has work waiting %vs",
	[claimant_team, claimant.held, claimant.deserved, object.get(claimant, "pending_seconds", 0)],
)

evidence contains sprintf(
	"team %s keeps %v of its deserved %v after losing %v (queue reclaimable); victim %s is preemptible and has run %vs (minimum %vs)",
	[
		victim_team, victim.team_held - victim.devices, victim.team_deserved, victim.devices,
		victim.workload_type, victim.running_seconds, victim_type.min_runtime_seconds,
	],
)
