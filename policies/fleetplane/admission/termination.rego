# Termination rules: every way the platform ends a pod (the kubelet at
# activeDeadlineSeconds, idle reclaim, preemption, upgrade and health drains,
# the max-runtime stop) deletes it with its own terminationGracePeriodSeconds,
# and the kubelet runs its preStop hooks inside that grace (and a one-off 2 s
# more). All that time the pod keeps its devices, while Volcano no longer
# counts a terminating pod against its queue, so its replacement runs beside
# it. So an accelerator pod's grace is bounded (termination-grace), which
# bounds its preStop hooks too, and priced: each run is priced up to its end
# plus its grace (budget.rego, pod_seconds).
package fleetplane.admission

import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   The longest terminationGracePeriodSeconds an accelerator pod may set. A
#   policy constant, not a configuration field, until the configuration
#   contract being rewritten can carry it: 120 s is a spot node's
#   interruption notice (AWS gives 2 minutes, GCP 30 s), so a workload that
#   survives spot already stops within it; the platform's own stops warn
#   first (the max-runtime stop after lifetime.stop_grace_seconds and the
#   next checkpoint window, idle reclaim after its grace, drains after
#   drain_timeout_seconds), so checkpoints are written before the end, not
#   in the grace.
max_termination_grace_seconds := 120

# METADATA
# description: Kubernetes' terminationGracePeriodSeconds when a pod sets none.
default_termination_grace_seconds := 30

# METADATA
# description: >-
#   An accelerator template whose grace period is not a whole number of
#   seconds at most max_termination_grace_seconds (a missing one is
#   Kubernetes' 30 s; a negative one the API server turns into 1 s).
deny contains msg if {
	pod_rules_apply
	some f in facts
	f.devices > 0
	grace := object.get(f.spec, "terminationGracePeriodSeconds", default_termination_grace_seconds)
	not grace_within_bound(grace)
	msg := sprintf(
		"termination-grace: %s sets terminationGracePeriodSeconds %s; a pod keeps its accelerators through its grace period (and the preStop hooks that run in it) whenever it is stopped, so set it to a whole number of seconds up to %d and checkpoint on the platform's warning instead",
		[f.where, json.marshal(grace), max_termination_grace_seconds],
	)
}

# METADATA
# description: >-
#   A probe's own terminationGracePeriodSeconds (liveness and startup probes
#   may set one, which replaces the pod's when the kubelet kills a container
#   whose probe failed) bounded like the pod's: a failing probe would
#   otherwise keep an accelerator container stopping for as long as it
#   names, past the bound the pod's grace keeps.
deny contains msg if {
	pod_rules_apply
	some f in facts
	f.devices > 0
	some entry in workloads.containers(f.spec)
	some probe in ["livenessProbe", "startupProbe"]
	grace := entry.container[probe].terminationGracePeriodSeconds
	not grace_within_bound(grace)
	msg := sprintf(
		"termination-grace: %s %s sets terminationGracePeriodSeconds %s; a container keeps its accelerators while it stops, so set it to a whole number of seconds up to %d or leave it unset (the pod's grace applies)",
		[workloads.container_where(f.where, entry), probe, json.marshal(grace), max_termination_grace_seconds],
	)
}

grace_within_bound(grace) if {
	is_number(grace)
	grace == floor(grace)
	grace <= max_termination_grace_seconds
}

# METADATA
# description: >-
#   The seconds a pod of a template holds its devices after it is told to
#   stop, as priced: its grace period (Kubernetes' 30 s when it sets none; a
#   negative one is 1 s; one that is not a number is refused above and
#   priced at the bound).
priced_grace(spec) := grace if {
	grace := object.get(spec, "terminationGracePeriodSeconds", default_termination_grace_seconds)
	is_number(grace)
	grace >= 0
} else := 1 if {
	is_number(spec.terminationGracePeriodSeconds)
} else := max_termination_grace_seconds

# METADATA
# description: >-
#   A bound on a run (a deadline or a default runtime) with the grace that
#   follows it; null (no bound) stays null.
with_grace(seconds, grace) := seconds + grace if is_number(seconds)

else := seconds
