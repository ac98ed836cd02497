# METADATA
# title: Lifetime decision
# description: >-
#   May the controller end this accelerator pod's work now, for how long it
#   lives? runtime-stop: the pod (its workload, its gang) ran past its workload
#   type's maximum runtime, was warned, the grace has passed and so has its
#   next checkpoint. orphan-reclaim: the pod's owner is gone or its Job
#   failed, it still holds accelerators, and it was found so at least the
#   grace ago. straggler-restart: the pod is a straggler of its gang (near-idle
#   while every peer is busy, over the window), was reported so before, opted
#   in with fleetplane.dev/straggler-action=restart, and has a controller that
#   starts it again. Allowed only on explicit evidence; missing or malformed
#   input never allows.
package fleetplane.decisions.lifetime

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

# A check that cannot be judged because one it builds on failed is not
# reported again: without a maximum runtime nothing is past it, without a
# warning there is no grace to count.
prerequisites := {
	"orphan_grace": {"found"},
	"past_max_runtime": {"bounded"},
	"grace": {"warned"},
	"checkpoint": {"warned"},
}

blocked(check) if {
	some prerequisite in prerequisites[check]
	not prerequisite in passed
}

# ------------------------------------------------------------------ input

actions := {"runtime-stop", "orphan-reclaim", "straggler-restart"}

lifetime := workloads.as_object(object.get(config, "lifetime", {}))

# Negation only ever applies to rules without arguments, to calls on defined
# values, or to equality, so a missing field makes a check fail, never vanish.
input_problems contains "input must be an object" if not is_object(input)

input_problems contains sprintf("input.action must be one of %s", [concat(", ", sort([a | some a in actions]))]) if {
	is_object(input)
	not valid_action
}

# A helper, so that a missing action is reported too (`not` of an undefined
# membership would be undefined, not true).
valid_action if input.action in actions

input_problems contains "input.pod must be a Pod object with metadata" if {
	is_object(input)
	not is_object(object.get(input, ["pod", "metadata"], null))
}

input_problems contains "input.now must be a non-negative integer" if {
	is_object(input)
	not workloads.is_whole(object.get(input, "now", null))
}

input_problems contains "input.runtime must be an object" if {
	input.action == "runtime-stop"
	not is_object(object.get(input, "runtime", null))
}

input_problems contains sprintf("input.runtime.%s must be a number", [field]) if {
	input.action == "runtime-stop"
	is_object(object.get(input, "runtime", null))
	some field in ["running_seconds", "stop_at"]
	not is_number(object.get(input.runtime, field, null))
}

input_problems contains "input.runtime.warned_at must be a number or null" if {
	input.action == "runtime-stop"
	is_object(object.get(input, "runtime", null))
	not number_or_null(input.runtime, "warned_at")
}

input_problems contains "input.workload_type must be a known workload type" if {
	input.action == "runtime-stop"
	not config.workload_types[object.get(input, "workload_type", "")]
}

input_problems contains "input.orphan must be an object" if {
	input.action == "orphan-reclaim"
	not is_object(object.get(input, "orphan", null))
}

input_problems contains "input.orphan.found_at must be a number or null" if {
	input.action == "orphan-reclaim"
	is_object(object.get(input, "orphan", null))
	not number_or_null(input.orphan, "found_at")
}

input_problems contains "input.straggler must be an object" if {
	input.action == "straggler-restart"
	not is_object(object.get(input, "straggler", null))
}

input_problems contains "input.straggler.peak_util_percent must be a number" if {
	input.action == "straggler-restart"
	is_object(object.get(input, "straggler", null))
	not is_number(object.get(input.straggler, "peak_util_percent", null))
}

input_problems contains "input.straggler.peers must be an array of {pod, mean_util_percent}" if {
	input.action == "straggler-restart"
	is_object(object.get(input, "straggler", null))
	not peers_well_formed
}

input_problems contains "input.straggler.reported_at must be a number or null" if {
	input.action == "straggler-restart"
	is_object(object.get(input, "straggler", null))
	not number_or_null(input.straggler, "reported_at")
}

peers_well_formed if {
	is_array(input.straggler.peers)
	every peer in input.straggler.peers {
		workloads.non_empty_string(object.get(peer, "pod", null))
		is_number(object.get(peer, "mean_util_percent", null))
	}
}

number_or_null(obj, field) if is_number(obj[field])

number_or_null(obj, field) if obj[field] == null

# ----------------------------------------------------------------- facts

labels := workloads.as_object(object.get(workloads.as_object(input.pod.metadata), "labels", {}))

annotations := workloads.as_object(object.get(workloads.as_object(input.pod.metadata), "annotations", {}))

type_config := config.workload_types[input.workload_type]

max_runtime := type_config.default_max_runtime_seconds

stop_grace := lifetime.stop_grace_seconds

runtime := input.runtime

# ----------------------------------------------------------------- checks

required_checks contains "not_exempt"

required_checks contains "type_matches" if input.action == "runtime-stop"

required_checks contains check if {
	input.action == "runtime-stop"
	some check in {"bounded", "past_max_runtime", "warned", "grace", "checkpoint", "deadline"}
}

required_checks contains check if {
	input.action == "orphan-reclaim"
	some check in {"orphaned", "found", "orphan_grace", "holds_accelerators"}
}

required_checks contains check if {
	input.action == "straggler-restart"
	some check in {"opted_in", "straggling", "peers_busy", "reported", "restartable", "holds_accelerators"}
}

passed contains "not_exempt" if not labels[lib.keys.exempt] == "true"

passed contains "type_matches" if labels[lib.keys.workload_type] == input.workload_type

passed contains "bounded" if is_number(max_runtime)

passed contains "past_max_runtime" if runtime.running_seconds > max_runtime

passed contains "warned" if is_number(runtime.warned_at)

passed contains "grace" if {
	runtime.warned_at <= input.now
	input.now >= runtime.warned_at + stop_grace
}

# The controller computes when the workload's next checkpoint is due after
# the warning (docs/contracts.md); never before the grace is over.
passed contains "checkpoint" if {
	runtime.stop_at >= runtime.warned_at + stop_grace
	input.now >= runtime.stop_at
}

passed contains "deadline" if not annotations[lib.keys.stop_deadline]

passed contains "deadline" if input.now >= workloads.parse_count(annotations[lib.keys.stop_deadline])

orphan := input.orphan

passed contains "orphaned" if orphan.reason in {"owner-gone", "job-failed"}

passed contains "found" if is_number(orphan.found_at)

passed contains "orphan_grace" if {
	orphan.found_at <= input.now
	input.now >= orphan.found_at + lifetime.orphan_grace_seconds
}

# A pod bound to a node and not finished holds its accelerators.
passed contains "holds_accelerators" if {
	workloads.non_empty_string(object.get(input.pod, ["spec", "nodeName"], null))
	not object.get(input.pod, ["status", "phase"], null) in {"Succeeded", "Failed"}
	count(workloads.pod_demand(workloads.as_object(object.get(input.pod, "spec", {})))) > 0
}

straggler := input.straggler

# Acting on a straggler is the workload owner's choice: the pod says so.
passed contains "opted_in" if labels[lib.keys.straggler_action] == "restart"

passed contains "straggling" if straggler.peak_util_percent <= lifetime.straggler_util_percent

passed contains "peers_busy" if {
	count(straggler.peers) > 0
	every peer in straggler.peers {
		peer.mean_util_percent >= lifetime.busy_util_percent
	}
}

# Reported (an Event the owner could see) on an earlier pass, never acted on unannounced.
passed contains "reported" if {
	is_number(straggler.reported_at)
	straggler.reported_at < input.now
}

# A restart deletes the pod: only a pod whose controller creates it again.
passed contains "restartable" if {
	some ref in object.get(input.pod.metadata, "ownerReferences", [])
	ref.controller == true
}

# ---------------------------------------------------------------- reasons

failures["not_exempt"] := sprintf("the pod is labelled %s=true", [lib.keys.exempt])

failures["type_matches"] := sprintf(
	"the pod's %s label is %s but the request says %s",
	[lib.keys.workload_type, json.marshal(object.get(labels, lib.keys.workload_type, null)), json.marshal(input.workload_type)],
)

failures["bounded"] := sprintf("workload type %s has no maximum runtime (default_max_runtime_seconds is null)", [input.workload_type])

failures["past_max_runtime"] := sprintf(
	"running %vs is not past the %vs maximum of %s",
	[runtime.running_seconds, max_runtime, input.workload_type],
)

failures["warned"] := "no runtime warning has been issued yet"

failures["grace"] := sprintf(
	"the grace period has not elapsed: warned at %v, grace is %vs, now is %v",
	[runtime.warned_at, stop_grace, input.now],
)

failures["checkpoint"] := sprintf(
	"the next checkpoint window ends at %v (not before the grace ends at %v); now is %v",
	[runtime.stop_at, runtime.warned_at + stop_grace, input.now],
)

failures["deadline"] := sprintf(
	"annotation %s=%s is not a past epoch time",
	[lib.keys.stop_deadline, annotations[lib.keys.stop_deadline]],
)

failures["orphaned"] := sprintf("orphan reason %s is neither owner-gone nor job-failed", [json.marshal(object.get(orphan, "reason", null))])

failures["found"] := "the pod has not been found orphaned before"

failures["orphan_grace"] := sprintf(
	"found orphaned at %v; the %vs grace has not passed (now %v)",
	[orphan.found_at, lifetime.orphan_grace_seconds, input.now],
)

failures["holds_accelerators"] := "the pod holds no accelerators (not on a node, finished, or requesting none)"

failures["opted_in"] := sprintf("acting on a straggler needs the pod's label %s=restart", [lib.keys.straggler_action])

failures["straggling"] := sprintf(
	"peak utilisation %v%% is above the straggler line of %v%%",
	[straggler.peak_util_percent, lifetime.straggler_util_percent],
)

failures["peers_busy"] := sprintf(
	"not every peer averaged at least the busy line of %v%%: %s",
	[lifetime.busy_util_percent, json.marshal(straggler.peers)],
)

failures["reported"] := "the straggler has not been reported on an earlier pass"

failures["restartable"] := "the pod has no controller to start it again (a bare pod is only reported)"

failure(check) := msg if {
	msg := failures[check]
} else := sprintf("check %s did not pass", [check])

evidence contains sprintf(
	"straggler of %s: peak %v%% (line %v%%), %d peer(s) at least %v%% busy; reported at %v",
	[object.get(straggler, "gang", null), straggler.peak_util_percent, lifetime.straggler_util_percent, count(straggler.peers), lifetime.busy_util_percent, straggler.reported_at],
) if input.action == "straggler-restart"

evidence contains sprintf(
	"orphaned (%s, %s), found at %v; grace %vs",
	[orphan.reason, object.get(orphan, "owner", null), orphan.found_at, lifetime.orphan_grace_seconds],
) if input.action == "orphan-reclaim"

evidence contains sprintf(
	"ran %vs, past the %vs maximum of %s; warned at %v, grace %vs; checkpoint window over at %v",
	[runtime.running_seconds, max_runtime, input.workload_type, runtime.warned_at, stop_grace, runtime.stop_at],
) if input.action == "runtime-stop"
