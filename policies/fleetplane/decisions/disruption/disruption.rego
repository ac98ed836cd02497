# METADATA
# title: Disruption decision
# description: >-
#   May an autoscaler (Karpenter's consolidation, drift, expiry) disrupt this
#   running accelerator pod now? The answer the controller turns into the pod
#   annotation karpenter.sh/do-not-disrupt: a pod that is not allowed is
#   protected. Protected: a pod that has not run its workload type's
#   min_runtime_seconds; a pod that declares checkpoints whose last one is
#   older than upgrade.checkpoint_max_age_seconds (the age the controller's
#   own drains evict at once); a member of a gang (Volcano PodGroup) of more
#   than one pod whose oldest member's checkpoint is older than that age (a
#   split gang loses all of its work). Missing or malformed input never allows:
#   it protects, it never unprotects.
package fleetplane.decisions.disruption

import data.fleetplane.config
import data.fleetplane.lib.workloads

# METADATA
# entrypoint: true
# description: >-
#   {"allow": bool, "reasons": [string], "recheck_at": number or null,
#   "revision": string or null}; allow false means protect. recheck_at: the
#   first instant (epoch seconds, after now) from which the same facts may be
#   answered otherwise, null when the clock alone changes nothing. revision:
#   data.fleetplane.revision, the policies and data OPA loaded, null when none.
#   The controller asks again about a pod only when its facts, the revision or
#   recheck_at say the answer may differ (docs/disruption.md).
decision := {"allow": allow, "reasons": reasons, "recheck_at": recheck_at, "revision": revision}

# The rules are shaped for the batched `decisions`, which answers every running accelerator pod
# of the fleet each pass (docs/scale.md): on a well-formed input nothing iterates or formats
# before it is needed. `well_formed` checks the input in one body; the problems are named only
# when it fails. Each fact is a rule, worked out once per input; a protection's message is
# formatted only when it holds, the evidence only when nothing does.

default allow := false

allow if {
	well_formed

	# not short_of_min_runtime, as Rego orders all values, without a negation's cost
	input.running_seconds >= min_runtime
	not checkpoint_stale
	not gang_stale
}

reasons := [evidence] if {
	allow
} else := sort(input_problems) if {
	not well_formed
} else := array.concat(checkpoint_reasons, runtime_reasons)

# METADATA
# entrypoint: true
# description: >-
#   The decision of each input.pods[key] (an object of inputs, each what
#   `decision` takes), by key: the controller asks once for many pods, where
#   one request per pod cost a 20,000-pod pass 75 s. Each answer is exactly
#   `decision` on that input; a key whose input is malformed is protected as
#   `decision` protects it. Not an object: no answers (nothing unprotected).
decisions := {key: answer |
	some key, one in object.get(input, "pods", {})
	answer := decision with input as one
}

# ------------------------------------------------------------------ input

# Exactly when input_problems is empty; a missing or malformed field fails it, so it never
# allows.
well_formed if {
	is_object(input.pod.metadata)
	is_number(input.now)
	input.now >= 0
	floor(input.now) == input.now
	is_number(input.running_seconds)
	input.running_seconds >= 0
	floor(input.running_seconds) == input.running_seconds
	is_object(config.workload_types[input.workload_type])
	is_boolean(input.checkpoints)
	type_name(input.last_checkpoint) in {"number", "null"}
	gang_well_formed
	is_number(max_age)
}

input_problems contains "input must be an object" if not is_object(input)

input_problems contains "input.pod must be a Pod object with metadata" if {
	is_object(input)
	not is_object(object.get(input, ["pod", "metadata"], null))
}

input_problems contains sprintf("input.%s must be a non-negative integer", [field]) if {
	is_object(input)
	some field in ["now", "running_seconds"]
	not whole(object.get(input, field, null))
}

input_problems contains "input.workload_type must be a known workload type" if {
	is_object(input)
	not known_type
}

known_type if is_object(config.workload_types[input.workload_type])

input_problems contains "input.checkpoints must be a boolean" if {
	is_object(input)
	not is_boolean(object.get(input, "checkpoints", null))
}

input_problems contains "input.last_checkpoint must be a number or null" if {
	is_object(input)
	not number_or_null(input, "last_checkpoint")
}

input_problems contains "input.gang must be null or {name, members, last_checkpoint}" if {
	is_object(input)
	not gang_well_formed
}

input_problems contains "data.fleetplane.config.upgrade.checkpoint_max_age_seconds must be a number" if {
	not is_number(max_age)
}

gang_well_formed if input.gang == null

gang_well_formed if {
	is_string(input.gang.name)
	input.gang.name != ""
	is_number(input.gang.members)
	input.gang.members >= 0
	floor(input.gang.members) == input.gang.members
	type_name(input.gang.last_checkpoint) in {"number", "null"}
}

number_or_null(obj, field) if is_number(obj[field])

number_or_null(obj, field) if obj[field] == null

whole(x) := workloads.is_whole(x)

# ----------------------------------------------------------------- facts

default max_age := null

max_age := config.upgrade.checkpoint_max_age_seconds

default min_runtime := 0

min_runtime := config.workload_types[input.workload_type].min_runtime_seconds

# Only a recorded checkpoint at most max_age old, and not in the future, is fresh.
checkpoint_fresh if {
	is_number(input.last_checkpoint)
	input.last_checkpoint <= input.now
	input.now - input.last_checkpoint <= max_age
}

gang_fresh if {
	is_number(input.gang.last_checkpoint)
	input.gang.last_checkpoint <= input.now
	input.now - input.gang.last_checkpoint <= max_age
}

# Read on a well-formed input only: gang null or an object with a whole `members`.
in_gang if input.gang.members > 1

# ------------------------------------------------------------ the clock

# The answer depends on the clock only where a threshold is crossed: the minimum runtime ends,
# a fresh checkpoint (the pod's, or its gang's oldest) grows older than max_age, a checkpoint
# stamped in the future arrives. The first of those instants (whole epoch seconds) is when the
# same facts may be answered otherwise; none: they never are. A malformed input is protected
# until the input changes.
default recheck_at := null

recheck_at := min(turns) if {
	well_formed
	count(turns) > 0
}

turns contains started_at + ceil(min_runtime) if short_of_min_runtime

turns contains stale_from(input.last_checkpoint) if {
	input.checkpoints == true
	not in_gang
	checkpoint_fresh
}

turns contains input.last_checkpoint if {
	input.checkpoints == true
	not in_gang
	input.last_checkpoint > input.now
}

turns contains stale_from(input.gang.last_checkpoint) if {
	in_gang
	gang_fresh
}

turns contains input.gang.last_checkpoint if {
	in_gang
	input.gang.last_checkpoint > input.now
}

# The first whole second at which a checkpoint taken at `at` is older than max_age.
stale_from(at) := floor(at + max_age) + 1

# What gave the answer: the revision of the policies and data OPA loaded, which the policy gate's
# component writes with them (components/policy_gate.py); null on an OPA that has none.
default revision := null

revision := data.fleetplane.revision if is_string(data.fleetplane.revision)

# ----------------------------------------------------------- protections

short_of_min_runtime if input.running_seconds < min_runtime

checkpoint_stale if {
	input.checkpoints == true
	not in_gang
	not checkpoint_fresh
}

gang_stale if {
	in_gang
	not gang_fresh
}

# The messages name instants, not ages: the same facts give the same words on every pass, so the
# controller (which rewrites a protected pod's reason when it changes) writes a protection
# once, not on every pass. `now - running_seconds` is the pod's start to the second: the
# controller's `running_seconds` is int(now) - int(start) (docs/contracts.md).
started_at := input.now - input.running_seconds

# In the order of their words ("last checkpoint", "member of gang" before "running since"):
# the reasons are sorted. A pod is never both checkpoint_stale and gang_stale.
checkpoint_reasons := [sprintf(
	"last checkpoint %s; older than %vs would lose work",
	[checkpoint_text(input.last_checkpoint), max_age],
)] if {
	checkpoint_stale
} else := [sprintf(
	"member of gang %s (%d pods): its oldest checkpoint %s, older than %vs; a split gang loses all of its work",
	[input.gang.name, input.gang.members, checkpoint_text(input.gang.last_checkpoint), max_age],
)] if {
	gang_stale
} else := []

runtime_reasons := [sprintf(
	"running since %s, protected until %s by the %vs minimum runtime of %s",
	[instant(started_at), instant(started_at + min_runtime), min_runtime, input.workload_type],
)] if {
	short_of_min_runtime
} else := []

checkpoint_text(at) := sprintf("at %s", [instant(at)]) if is_number(at)

checkpoint_text(null) := "never recorded"

# Epoch seconds as an RFC 3339 UTC instant to the second; a number OPA cannot format (far out
# of range) as itself.
instant(seconds) := text if {
	text := time.format([seconds * 1000000000, "UTC", "2006-01-02T15:04:05Z07:00"])
} else := sprintf("%v (epoch seconds)", [seconds])

evidence := sprintf(
	"nothing protected: running since %s (minimum runtime %vs), checkpoint %s, %s",
	[instant(started_at), min_runtime, checkpoint_state, gang_state],
)

checkpoint_state := "fresh" if {
	input.checkpoints == true
	checkpoint_fresh
} else := "not declared"

gang_state := sprintf("gang %s checkpointed within %vs", [input.gang.name, max_age]) if {
	in_gang
} else := "no gang"
