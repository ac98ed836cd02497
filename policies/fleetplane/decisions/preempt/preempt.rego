# METADATA
# title: Preempt decision
# description: >-
#   May this pending workload (the preemptor) preempt that running pod (the
#   victim)? Allowed only on explicit evidence: strictly higher priority, a
#   preemptible and non-exempt victim that has run its minimum runtime and
#   holds accelerators, and, across teams, a victim team that stays at or
#   above its guaranteed quota after losing the victim.
package fleetplane.decisions.preempt

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

# A victim that holds nothing has no quota to judge; say it once.
prerequisites := {"quota": {"holds_accelerators"}}

blocked(check) if {
	some prerequisite in prerequisites[check]
	not prerequisite in passed
}

# ------------------------------------------------------------------ input

preemptor := input.preemptor

victim := input.victim

# Negation only ever applies to rules without arguments, to calls on defined
# values, or to equality, so a missing field makes a check fail, never vanish.
input_problems contains "input must be an object" if not input_is_object

input_problems contains sprintf("input.%s must be an object", [side]) if {
	input_is_object
	some side in sides
	not is_object(object.get(input, side, null))
}

input_problems contains sprintf("input.%s.pod must be a Pod object with metadata", [side]) if {
	some side in sides
	is_object(object.get(input, side, null))
	not is_object(object.get(input[side], ["pod", "metadata"], null))
}

input_problems contains sprintf("input.%s.priority must be a number", [side]) if {
	some side in sides
	is_object(object.get(input, side, null))
	not is_number(object.get(input[side], "priority", null))
}

input_problems contains sprintf("input.%s.workload_type must be a known workload type", [side]) if {
	some side in sides
	is_object(object.get(input, side, null))
	not config.workload_types[input[side].workload_type]
}

input_problems contains "input.victim.running_seconds must be a number" if {
	is_object(object.get(input, "victim", null))
	not is_number(object.get(victim, "running_seconds", null))
}

input_problems contains "input.victim.team_usage must be a map of resource to a number" if {
	is_object(object.get(input, "victim", null))
	not usage_map(object.get(victim, "team_usage", null))
}

sides := ["preemptor", "victim"]

input_is_object if is_object(input)

usage_map(x) if {
	is_object(x)
	every v in x {
		is_number(v)
	}
}

# ----------------------------------------------------------------- facts

victim_labels := workloads.as_object(object.get(workloads.as_object(victim.pod.metadata), "labels", {}))

victim_type := config.workload_types[victim.workload_type]

team_of(pod) := config.namespaces[pod.metadata.namespace]

victim_team := team_of(victim.pod)

victim_spec := workloads.as_object(object.get(workloads.as_object(victim.pod), "spec", {}))

# Devices the victim holds, per family (MIG devices count as GPUs).
victim_holds := {family: n |
	demand := workloads.pod_demand(victim_spec)
	some family in {lib.family(r) | some r, _ in demand}
	n := sum([d | some r, d in demand; lib.family(r) == family])
	n > 0
}

same_team if team_of(preemptor.pod) == victim_team

# METADATA
# description: >-
#   Whether the victim may be preempted at all: its preemptible label
#   ("true"/"false") wins, otherwise the workload type's default.
victim_preemptible if victim_labels[lib.keys.preemptible] == "true"

victim_preemptible if {
	not victim_labels[lib.keys.preemptible]
	victim_type.preemptible == true
}

# ----------------------------------------------------------------- checks

required_checks := {"priority", "preemptible", "not_exempt", "min_runtime", "holds_accelerators", "quota"}

passed contains "priority" if preemptor.priority > victim.priority

passed contains "preemptible" if victim_preemptible

passed contains "not_exempt" if not victim_labels[lib.keys.exempt] == "true"

passed contains "min_runtime" if victim.running_seconds >= victim_type.min_runtime_seconds

passed contains "holds_accelerators" if count(victim_holds) > 0

# Within one team, priority alone orders the work.
passed contains "quota" if same_team

# Across teams, the victim's team keeps its guaranteed quota afterwards.
passed contains "quota" if {
	not same_team
	guaranteed := config.teams[victim_team].guaranteed
	count(victim_holds) > 0
	every family, n in victim_holds {
		victim.team_usage[family] - n >= guaranteed[family]
	}
}

# ---------------------------------------------------------------- reasons

failures["priority"] := sprintf(
	"preemptor priority %v is not higher than victim priority %v",
	[preemptor.priority, victim.priority],
)

failures["preemptible"] := sprintf(
	"the victim is not preemptible (label %s=%s, %s default %v)",
	[lib.keys.preemptible, object.get(victim_labels, lib.keys.preemptible, "<unset>"), victim.workload_type, object.get(victim_type, "preemptible", null)],
)

failures["not_exempt"] := sprintf("the victim is labelled %s=true", [lib.keys.exempt])

failures["min_runtime"] := sprintf(
	"the victim has run %vs, less than the %vs minimum for %s",
	[victim.running_seconds, victim_type.min_runtime_seconds, victim.workload_type],
)

failures["holds_accelerators"] := "the victim holds no accelerators, so preempting it frees none"

failures["quota"] := msg if {
	not victim_team
	msg := sprintf("the victim's namespace %q belongs to no team", [object.get(victim.pod.metadata, "namespace", "")])
}

failures["quota"] := msg if {
	victim_team
	msg := sprintf(
		"team %s would fall below its guaranteed quota %s (usage %s, victim holds %s)",
		[
			victim_team, json.marshal(object.get(config.teams[victim_team], "guaranteed", null)),
			json.marshal(victim.team_usage), json.marshal(victim_holds),
		],
	)
}

failure(check) := msg if {
	msg := failures[check]
} else := sprintf("check %s did not pass", [check])

evidence contains sprintf(
	"preemptor priority %v > victim priority %v; victim %s is preemptible and has run %vs (minimum %vs)",
	[preemptor.priority, victim.priority, victim.workload_type, victim.running_seconds, victim_type.min_runtime_seconds],
)

evidence contains sprintf("both workloads belong to team %s", [victim_team]) if same_team

evidence contains sprintf(
	"team %s keeps at least its guaranteed quota %s after losing %s (usage %s)",
	[victim_team, json.marshal(config.teams[victim_team].guaranteed), json.marshal(victim_holds), json.marshal(victim.team_usage)],
) if not same_team
