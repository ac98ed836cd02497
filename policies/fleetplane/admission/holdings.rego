# Holding rules: What a workload holds is judged where it is decided, not pod
# by pod. A template whose pods nothing bounds (a DaemonSet's, a generic
# kind's without a count) may not carry accelerators; a CronJob's runs may
# not overlap (concurrencyPolicy Allow), so one run's holding is the
# CronJob's; a scale subresource update is judged as the parent's holding
# after it; a HorizontalPodAutoscaler is judged at its maxReplicas. The scale
# subresource and an autoscaler carry no pod template: they read the
# per-replica record the controller keeps for each scalable workload
# (data.fleetplane.workloads, see docs/contracts.md) and fail closed without
# it, except for Deployments, whose scale is applied to a ReplicaSet that the
# gate judges with its template.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib.workloads

# ------------------------------------------------------------- unbounded

deny contains msg if {
	holding_judged
	some f in facts
	not f.bounded
	f.devices > 0
	msg := sprintf("unbounded-holding: %s asks for accelerators, but %s", [f.where, f.bound])
}

# ------------------------------------------------------------- cronjobs

# Allow (the default) starts a run while the previous ones still run, so the
# runs a CronJob holds at once depend on its schedule and their runtime;
# Forbid and Replace keep one.
deny contains msg if {
	concurrency_judged
	kind_class == "cronjob"
	policy := object.get(input.request.object, ["spec", "concurrencyPolicy"], "Allow")
	not policy in {"Forbid", "Replace"}
	msg := sprintf(
		"cronjob-concurrency: concurrencyPolicy %s lets the runs of an accelerator CronJob overlap, so nothing bounds what it holds; set spec.concurrencyPolicy: Forbid (or Replace)",
		[json.marshal(policy)],
	)
}

# Judged where the template rules are, and when an update of a CronJob's
# spec (not its template) changes its policy.
concurrency_judged if judged

concurrency_judged if {
	mode == "holding"
	accelerator_workload
	spec_written("concurrencyPolicy")
}

# ----------------------------------------------------------------- scale

scale_replicas := n if {
	n := input.request.object.spec.replicas
	workloads.is_whole(n)
}

scale_previous := n if {
	n := input.request.oldObject.spec.replicas
	workloads.is_whole(n)
} else := 0

scale_evaluated if scale_replicas

deny contains "malformed-request: the Scale object's spec.replicas must be a non-negative integer" if {
	mode == "scale"
	not scale_replicas
}

# Scaling down or keeping the count adds nothing.
scale_up if {
	mode == "scale"
	judged_namespace
	scale_replicas > scale_previous
}

# The parent of a scale subresource, as the record key of data.fleetplane.workloads.
scale_key := record_key(input.request.resource.group, input.request.resource.resource, input.request.name)

# METADATA
# description: >-
#   The key of a workload in data.fleetplane.workloads[namespace]:
#   "<resource>.<group>/<name>", or "<resource>/<name>" for the core group.
record_key(group, resource, name) := sprintf("%s/%s", [resource, name]) if {
	group == ""
} else := sprintf("%s.%s/%s", [resource, group, name])

# The controller's record of the parent, when it is of this very object (a
# record of a deleted object of the same name does not count).
scale_record := record if {
	record := data.fleetplane.workloads[namespace][scale_key]
	record.uid == scale_uid
}

scale_uid := uid if {
	uid := input.request.oldObject.metadata.uid
	is_string(uid)
} else := input.request.object.metadata.uid

deny contains msg if {
	scale_up
	not scale_record
	not input.request.resource.group == "apps"
	msg := scale_unknown_message
}

deny contains msg if {
	scale_up
	not scale_record
	input.request.resource.group == "apps"
	input.request.resource.resource != "deployments"
	msg := scale_unknown_message
}

scale_unknown_message := sprintf(
	"scale: the gate has no record of what one replica of %s holds (data.fleetplane.workloads, kept by the controller), so it cannot judge %d replicas; set spec.replicas on the object itself, which the gate judges with its template, or retry once the controller has recorded it",
	[scale_key, scale_replicas],
)

deny contains msg if {
	scale_up
	some msg in holding_problems(scale_record, scale_key, scale_replicas, scale_uids)
}

scale_uids := {scale_uid}

# METADATA
# description: >-
#   What a recorded workload would break at a number of replicas: the type's
#   maximum and the approval threshold (the record's approval id, checked as
#   for templates). A record of a workload without accelerators breaks
#   nothing; a malformed record or an unknown type is a problem of its own.
holding_problems(record, key, replicas, uids) := set() if {
	record.devices_per_replica == 0
} else := problems if {
	workloads.is_whole(record.devices_per_replica)
	type_name := record.workload_type
	maximum := config.workload_types[type_name].max_accelerators
	held := replicas * record.devices_per_replica
	problems := {msg |
		held > maximum
		msg := sprintf(
			"max-accelerators: %s at %d replicas would hold %d accelerators (%d per replica); %s workloads may hold at most %d, so use at most %d replicas",
			[key, replicas, held, record.devices_per_replica, type_name, maximum, floor(maximum / record.devices_per_replica)],
		)
	} | {msg |
		held >= config.approval.threshold_accelerators
		reason := approval_refusal(object.get(record, "approval_id", null), held, uids, key)
		msg := sprintf(
			"approval: %s at %d replicas would hold %d accelerators (approval needed from %d); %s",
			[key, replicas, held, config.approval.threshold_accelerators, reason],
		)
	}
} else := {sprintf(
	"scale: data.fleetplane.workloads.%s.%s must be {uid, workload_type (a known type), devices_per_replica (a whole number), approval_id}, got %s; the controller must record it again",
	[namespace, key, json.marshal(record)],
)}

# ------------------------------------------------------------ autoscalers

autoscaler_target := input.request.object.spec.scaleTargetRef

# The group of an apiVersion ("apps/v1" -> "apps", "v1" -> "").
api_group(api_version) := group if {
	[group, _] := split(api_version, "/")
} else := ""

# The recorded workload an autoscaler scales: by resource for the kinds
# whose resource name is known, else by kind among the namespace's records.
autoscaler_record := [key, record] if {
	group := api_group(autoscaler_target.apiVersion)
	resource := {
		"Deployment": "deployments",
		"StatefulSet": "statefulsets",
		"ReplicaSet": "replicasets",
		"ReplicationController": "replicationcontrollers",
	}[autoscaler_target.kind]
	key := record_key(group, resource, autoscaler_target.name)
	record := data.fleetplane.workloads[namespace][key]
} else := [key, record] if {
	some key, record in data.fleetplane.workloads[namespace]
	record.kind == autoscaler_target.kind
	endswith(key, concat("", ["/", autoscaler_target.name]))
}

deny contains msg if {
	mode == "autoscaler"
	judged_namespace
	[key, record] := autoscaler_record
	maximum := input.request.object.spec.maxReplicas
	some problem in holding_problems(record, key, maximum, {record.uid})
	msg := sprintf("%s (HorizontalPodAutoscaler %s may scale it to maxReplicas %d)", [problem, object.get(input.request.object.metadata, "name", ""), maximum])
}

warnings contains msg if {
	mode == "autoscaler"
	judged_namespace
	not autoscaler_record
	msg := sprintf(
		"autoscaler: the gate has no record of %s %q yet, so it judges each scale-up this autoscaler makes instead of its maxReplicas",
		[object.get(autoscaler_target, "kind", "?"), object.get(autoscaler_target, "name", "?")],
	)
}
