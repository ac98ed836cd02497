# Owner references (issue 33, "forge what the controller trusts"): an owner
# reference decides which workload an object belongs to: the approval and
# the budget reservation it counts under (accelerators.rego object_uids
# reads every owner's uid), and what the controller reclaims, stops and
# preempts with it (controller/decide/lineage.py follows controlling owners;
# controller/observe/owners.py reads the owner a pod names). A user who
# could write one would put a pod under another workload's approval or
# reservation, or make the controller act on the wrong object.
#
# Closed at the gate, on CREATE and on every UPDATE that adds or changes a
# reference: only the platform writes owner references on the objects the
# gate judges: the controller, platform admins, and the controllers that
# create objects from judged ones (kube-controller-manager's, Volcano's, the
# configured operators': data.fleetplane.config.platform), which is how
# owner references come to be in Kubernetes. The gate cannot see the owner
# (OPA holds no copy of the cluster), so it cannot check that a user's
# reference is true; refusing every user-written one is the only check it
# can make without a lookup, and ordinary manifests carry none. The
# controller keeps its own guard: it counts an owner only when an object of
# that name has the uid the reference names (observe/owners.py). A team's
# own controller that writes owner references is registered as an operator
# in the fleet configuration (`operators`).
package fleetplane.admission

import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   Owner references the request writes, as [index, reference]: every one on
#   CREATE; on UPDATE those that were not on the old object as they are now
#   (removing one, as the garbage collector does, writes none).
written_owner_references contains [i, ref] if {
	input.request.operation == "CREATE"
	some i, ref in workloads.as_array(object.get(input.request.object, ["metadata", "ownerReferences"], []))
}

written_owner_references contains [i, ref] if {
	input.request.operation == "UPDATE"
	old := workloads.as_array(object.get(workloads.as_object(input.request.oldObject), ["metadata", "ownerReferences"], []))
	some i, ref in workloads.as_array(object.get(input.request.object, ["metadata", "ownerReferences"], []))
	not ref in old
}

deny contains msg if {
	mode in {"full", "changes", "holding", "metadata"}
	judged_namespace
	some [i, ref] in written_owner_references
	not platform_requester
	owner := workloads.as_object(ref)
	msg := sprintf(
		"owner-reference: metadata.ownerReferences[%d] names %s %s as the owner; owner references decide which approval and budget reservation a workload counts under and what the controller stops, reclaims and preempts with it, so only the platform and the controllers that create objects write them; remove it (group your objects with labels), or ask a platform admin to register your controller as an operator",
		[i, object.get(owner, "kind", "an object"), json.marshal(object.get(owner, "name", ""))],
	)
}
