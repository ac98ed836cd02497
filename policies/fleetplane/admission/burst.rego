# Burst tiers (issue 34, docs/autoscaling.md "bursting"): the nodes of a
# burst tier (on-demand after the reservation, spot) carry the taint
# fleetplane.dev/burst-tier=<tier>:NoSchedule (fleet/karpenter.py
# BURST_TIER). Only the controller's burst concern lets a team's waiting
# pods onto them, by adding the toleration once the burst policy decision
# allows the team that tier (its budget headroom, workload type, residency).
# A toleration of that taint written by anyone else reaches burst capacity
# without asking the policy: refused on every pod spec the gate judges
# (Pods and pod templates, on create and on an update that writes it). The
# controller's own update of a waiting pod stays admitted; so does an
# update that keeps a toleration the controller added. A toleration of
# every taint (an empty key with Exists) includes the burst taint; it is
# refused by maintenance.rego already, and named here too so the message
# says what it reaches.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib.workloads

# METADATA
# description: The taint key of burst-tier nodes (fleet/karpenter.py BURST_TIER).
burst_taint_key := "fleetplane.dev/burst-tier"

# METADATA
# description: >-
#   What a toleration tolerates of the burst tiers' taint (NoSchedule, any
#   tier): the key itself with any operator or value, or every taint (an
#   empty key with Exists). Undefined for any other toleration.
tolerated_burst_taint(toleration) := sprintf("the burst tiers' taint %s", [burst_taint_key]) if {
	object.get(toleration, "key", "") == burst_taint_key
	object.get(toleration, "effect", "") in {"", "NoSchedule"}
} else := sprintf("every taint, the burst tiers' %s included", [burst_taint_key]) if {
	object.get(toleration, "key", "") == ""
	object.get(toleration, "operator", "Equal") == "Exists"
	object.get(toleration, "effect", "") in {"", "NoSchedule"}
}

# METADATA
# description: >-
#   True when the request may add burst-tier tolerations: the controller
#   (whose burst concern asks the policy first) and the platform's admins.
#   Not the workload controllers the trust rules name: they copy templates
#   the gate judged, and a kind the gate is not sent would launder the
#   toleration through them.
burst_toleration_writer if {
	requester != ""
	requester == config.platform.controller_service_account
}

burst_toleration_writer if {
	some group in input.request.userInfo.groups
	group in config.platform.admin_groups
}

# The tolerations an update of a Pod keeps (the controller's, added while
# the pod waited); a workload's templates carry none of the controller's.
kept_tolerations := workloads.as_array(object.get(workloads.as_object(input.request.oldObject), ["spec", "tolerations"], [])) if {
	kind_class == "pod"
	input.request.operation == "UPDATE"
} else := []

deny contains msg if {
	some f in facts
	tolerations_judged(f)
	not burst_toleration_writer
	some toleration in workloads.as_array(f.spec.tolerations)
	tolerated := tolerated_burst_taint(toleration)
	not toleration in kept_tolerations
	msg := sprintf(
		"burst-toleration: %s tolerates %s; bursting is granted by the controller under the burst policy (budget headroom, workload type) when the team's work waits, so remove the toleration",
		[f.where, tolerated],
	)
}

# METADATA
# description: >-
#   True when a pod spec tolerates the burst tiers' taint (the fast path
#   leaves such specs to the full rules).
tolerates_burst_tier(spec) if {
	some toleration in workloads.as_array(object.get(spec, "tolerations", []))
	tolerated_burst_taint(toleration)
}
