# Unmodellable preemptors (issue 33): the controller is the fleet's one
# preemptor (controller/decide/preempt): it picks victims on a snapshot by
# node, model, capacity type and free devices, and evicts them so a pending
# accelerator workload fits. It does not model where other pods run, so a
# pending pod that also needs required pod affinity, required pod
# anti-affinity or a topology spread that refuses to schedule
# (whenUnsatisfiable: DoNotSchedule) may still not fit on the node it freed:
# the controller evicts for it every pass, and it never runs. So an
# accelerator pod template may only state such wishes as preferences
# (preferredDuringSchedulingIgnoredDuringExecution, whenUnsatisfiable:
# ScheduleAnyway), which the scheduler honours where it can and which never
# keep a freed node empty. Pods without accelerators preempt nothing and keep
# every constraint; required node affinity is modelled (the model and pool
# labels) and stays allowed.
#
# Required pod affinity is ordinary for some work (a server beside its cache,
# workers beside their parameter server), so the fleet may allow it per
# workload type (workload_types.<type>.allow_required_pod_affinity, default
# false): the platform then accepts, for that type, that the controller may
# evict for such a pod on a node its affinity rules out. Required
# anti-affinity and strict spreads stay refused for every type.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib
import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   The placement constraints of a pod spec the preemption model cannot
#   reason about, as descriptions for the message: required pod affinity,
#   required pod anti-affinity, each topology spread constraint that refuses
#   to schedule (whenUnsatisfiable DoNotSchedule, the API's only other value
#   besides ScheduleAnyway; a missing one counts, so missing input refuses).
unmodellable_constraints(spec) := {c |
	some [c, field] in [["required pod affinity", "podAffinity"], ["required pod anti-affinity", "podAntiAffinity"]]
	count(workloads.as_array(object.get(spec, ["affinity", field, "requiredDuringSchedulingIgnoredDuringExecution"], []))) > 0
} | {sprintf("a topology spread over %s with whenUnsatisfiable DoNotSchedule", [key]) |
	some constraint in workloads.as_array(object.get(spec, "topologySpreadConstraints", []))
	object.get(constraint, "whenUnsatisfiable", "DoNotSchedule") != "ScheduleAnyway"
	key := object.get(constraint, "topologyKey", "?")
}

# METADATA
# description: >-
#   True when a pod spec has a constraint unmodellable_constraints names (the
#   fast path leaves such specs to the full rules).
unmodellable_placement(spec) if count(unmodellable_constraints(spec)) > 0

# Pod affinity and topology spread are immutable on a pod, so they are judged
# where they are written: a create, or an update of a template (mode full).
deny contains msg if {
	pod_rules_apply
	some f in facts
	count(f.demand) > 0
	some constraint in unmodellable_constraints(f.spec)
	not allowed_for_type(f, constraint)
	msg := sprintf(
		"unmodellable-placement: %s asks for accelerators with %s; the platform's preemption frees nodes by devices, model and capacity and cannot reason about where other pods run, so such a pod may never fit where it preempted; state it as a preference (preferredDuringSchedulingIgnoredDuringExecution, or whenUnsatisfiable: ScheduleAnyway)%s",
		[f.where, constraint, type_hint(constraint)],
	)
}

# METADATA
# description: >-
#   True when the pod's workload type allows the constraint: required pod
#   affinity where workload_types.<type>.allow_required_pod_affinity is true.
#   A type without the key, or a pod without a known type, allows nothing.
allowed_for_type(f, "required pod affinity") if {
	object.get(config.workload_types, [f.labels[lib.keys.workload_type], "allow_required_pod_affinity"], false) == true
}

type_hint("required pod affinity") := ", or use a workload type whose configuration allows required pod affinity (workload_types.<type>.allow_required_pod_affinity)"

type_hint(constraint) := "" if constraint != "required pod affinity"
