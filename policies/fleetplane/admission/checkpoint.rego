# Checkpoint rules: A team's pods record their checkpoints on themselves
# (`fleetplane checkpoint`, docs/checkpoint.md): the tenancy component lets
# every ServiceAccount of a team namespace patch the pods there, and RBAC
# cannot narrow that to one annotation. So a pod UPDATE by a ServiceAccount of
# the pod's own namespace may change fleetplane.dev/last-checkpoint and
# nothing else: not the spec, labels, owners, finalizers or any other
# annotation (a relabelled pod would leave its ReplicaSet, which makes
# another). Platform-owned keys stay refused for every identity (trust).
# People of the team (its groups, bound to `edit`) are not concerned.
package fleetplane.admission

import data.fleetplane.lib
import data.fleetplane.lib.workloads

deny contains msg if {
	input.request.operation == "UPDATE"
	input.request.kind.kind == "Pod"
	object.get(input.request, "subResource", "") == ""
	in_team_namespace
	startswith(requester, sprintf("system:serviceaccount:%s:", [namespace]))
	not platform_requester
	changes := pod_changes_beside_checkpoint
	count(changes) > 0
	msg := sprintf(
		"checkpoint: ServiceAccount %s may change only the annotation %s of a pod (to record a checkpoint: fleetplane checkpoint); this update also changes %s",
		[requester, lib.keys.last_checkpoint, concat(", ", sort(changes))],
	)
}

# METADATA
# description: >-
#   What a pod UPDATE changes besides the checkpoint annotation, by place
#   (metadata fields the API server keeps itself are not compared).
pod_changes_beside_checkpoint contains place if {
	new := workloads.as_object(input.request.object)
	old := workloads.as_object(input.request.oldObject)
	some place, path in {
		"spec": ["spec"],
		"metadata.labels": ["metadata", "labels"],
		"metadata.ownerReferences": ["metadata", "ownerReferences"],
		"metadata.finalizers": ["metadata", "finalizers"],
	}
	object.get(new, path, null) != object.get(old, path, null)
}

pod_changes_beside_checkpoint contains sprintf("annotation %s", [key]) if {
	new := object.get(workloads.as_object(input.request.object), ["metadata", "annotations"], {})
	old := object.get(workloads.as_object(input.request.oldObject), ["metadata", "annotations"], {})
	some key in ({k | some k, _ in new} | {k | some k, _ in old})
	key != lib.keys.last_checkpoint
	object.get(new, key, null) != object.get(old, key, null)
}
