# METADATA
# title: Reclaim decision
# description: >-
#   May the controller reclaim (evict) this pod for being idle? Allowed only on
#   explicit evidence: a reclaimable workload type, no exemption, a complete
#   idle window at or below the type's utilisation threshold, and a warning
#   issued inside that window at least the grace period ago.
package fleetplane.decisions.reclaim

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

# METADATA
# description: >-
#   The evidence when allowed; otherwise what is missing: the malformed input
#   fields if any, else every failed check.
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
# reported again: without a warning there is no warning time to judge, and
# without an idle policy there are no thresholds.
prerequisites := {
	"window": {"reclaimable"},
	"utilisation": {"reclaimable"},
	"engine": {"reclaimable"},
	"warning_in_window": {"warned"},
	"grace": {"warned", "reclaimable"},
}

blocked(check) if {
	some prerequisite in prerequisites[check]
	not prerequisite in passed
}

# ------------------------------------------------------------------ input

idle := input.idle

numeric_fields := ["window_seconds", "samples", "expected_samples", "max_util_percent", "now"]

nullable_fields := ["max_engine_active", "max_fb_used_mib", "warned_at"]

# Negation only ever applies to rules without arguments, to calls on defined
# values, or to equality, so a missing field makes a check fail, never vanish.
input_problems contains "input.pod must be a Pod object with metadata" if not valid_pod

input_problems contains "input.workload_type must be a string" if not valid_type_name

input_problems contains "input.idle must be an object" if not idle_is_object

input_problems contains sprintf("input.idle.%s must be a number", [field]) if {
	idle_is_object
	some field in numeric_fields
	not is_number(object.get(idle, field, null))
}

valid_pod if is_object(input.pod.metadata)

valid_type_name if is_string(input.workload_type)

idle_is_object if is_object(input.idle)

input_problems contains sprintf("input.idle.%s must be a number or null", [field]) if {
	idle_is_object
	some field in nullable_fields
	not number_or_null(idle, field)
}

input_problems contains sprintf("input.workload_type %q is not a known workload type", [input.workload_type]) if {
	valid_type_name
	not config.workload_types[input.workload_type]
}

number_or_null(obj, field) if is_number(obj[field])

number_or_null(obj, field) if obj[field] == null

# ----------------------------------------------------------------- checks

labels := workloads.as_object(object.get(workloads.as_object(input.pod.metadata), "labels", {}))

annotations := workloads.as_object(object.get(workloads.as_object(input.pod.metadata), "annotations", {}))

type_idle := config.workload_types[input.workload_type].idle

required_checks := {
	"reclaimable", "not_exempt", "type_matches", "window", "samples",
	"utilisation", "engine", "warned", "warning_in_window", "grace", "deadline",
}

passed contains "reclaimable" if is_object(type_idle)

passed contains "not_exempt" if not labels[lib.keys.exempt] == "true"

passed contains "type_matches" if not labels[lib.keys.workload_type]

passed contains "type_matches" if labels[lib.keys.workload_type] == input.workload_type

passed contains "window" if idle.window_seconds >= type_idle.window_seconds

passed contains "samples" if {
	idle.expected_samples > 0
	idle.samples >= idle.expected_samples
}

passed contains "utilisation" if idle.max_util_percent <= type_idle.util_threshold_percent

# The engine-activity ratio (0..1) is held to the same threshold as utilisation;
# null means the GPU does not report it.
passed contains "engine" if {
	idle.max_engine_active == null
	is_number(type_idle.util_threshold_percent)
}

passed contains "engine" if idle.max_engine_active * 100 <= type_idle.util_threshold_percent

passed contains "warned" if is_number(idle.warned_at)

passed contains "warning_in_window" if {
	idle.warned_at <= idle.now
	idle.warned_at >= idle.now - idle.window_seconds
}

passed contains "grace" if idle.now - idle.warned_at >= type_idle.grace_seconds

passed contains "deadline" if not annotations[lib.keys.reclaim_deadline]

passed contains "deadline" if idle.now >= workloads.parse_count(annotations[lib.keys.reclaim_deadline])

# ---------------------------------------------------------------- reasons

failures["reclaimable"] := sprintf("workload type %s is never reclaimed (no idle policy)", [input.workload_type])

failures["not_exempt"] := sprintf("the pod is labelled %s=true", [lib.keys.exempt])

failures["type_matches"] := sprintf(
	"the pod's %s label is %q but the request says %q",
	[lib.keys.workload_type, labels[lib.keys.workload_type], input.workload_type],
)

failures["window"] := sprintf(
	"idle evidence covers %vs, less than the %vs window %s requires",
	[idle.window_seconds, type_idle.window_seconds, input.workload_type],
)

failures["samples"] := sprintf(
	"idle evidence is incomplete: %v of %v expected samples",
	[idle.samples, idle.expected_samples],
)

failures["utilisation"] := sprintf(
	"peak utilisation %v%% is above the %v%% idle threshold",
	[idle.max_util_percent, type_idle.util_threshold_percent],
)

failures["engine"] := sprintf(
	"peak engine activity %v is above the %v%% idle threshold",
	[idle.max_engine_active, type_idle.util_threshold_percent],
)

failures["warned"] := "no idle warning has been issued yet"

failures["warning_in_window"] := sprintf(
	"the warning at %v is not inside the idle window (%v..%v), so the pod may have been busy since; warn again",
	[idle.warned_at, idle.now - idle.window_seconds, idle.now],
)

failures["grace"] := sprintf(
	"the grace period has not elapsed: warned %vs ago, grace is %vs",
	[idle.now - idle.warned_at, type_idle.grace_seconds],
)

failures["deadline"] := sprintf(
	"annotation %s=%s is not a past epoch time",
	[lib.keys.reclaim_deadline, annotations[lib.keys.reclaim_deadline]],
)

failure(check) := msg if {
	msg := failures[check]
} else := sprintf("check %s did not pass", [check])

evidence contains sprintf(
	"idle for %vs (needs %vs) at peak %v%% utilisation (threshold %v%%), %v of %v samples",
	[idle.window_seconds, type_idle.window_seconds, idle.max_util_percent, type_idle.util_threshold_percent, idle.samples, idle.expected_samples],
)

evidence contains sprintf(
	"warned %vs ago, inside the idle window; grace is %vs",
	[idle.now - idle.warned_at, type_idle.grace_seconds],
)
