# DRA claim rules: GPUs through Dynamic Resource Allocation claims
# (resource.k8s.io/v1), judged as device requests. A ResourceClaim or
# ResourceClaimTemplate is refused, when written, unless every request asks
# for a bounded number of devices (allocationMode ExactCount with a count) of
# NVIDIA's GPU DeviceClass gpu.nvidia.com, without adminAccess or prioritized
# alternatives. A pod (or a workload's pod template) that references a claim
# or a template is judged with what the claim holds: its GPUs join the pod's
# demand (lib/dra_claims.rego), so count, model, pools, approval, maximum,
# budget and preemption judge them as nvidia.com/gpu; the product its
# productName selector pins is the model. The claim's content is read from the
# records of the namespace's claims and templates,
# data.fleetplane.claims[namespace]["resourceclaims/<name>" or
# "resourceclaimtemplates/<name>"] = the ResourceClaimSpec
# (docs/contracts.md). Why records and not the admission review alone: a pod
# names its claim and holds none of it, and a claim's spec is immutable once
# written, so a record of it stays true for the claim's life; judging the pod
# at the claim's creation instead could not know the pods that share a claim
# or how many pods a template will make. A pod that references a claim the
# gate has no record of is refused (fail closed) with a message to retry: the
# workload controllers retry, and a user creates the claim first.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib.claims

# METADATA
# description: >-
#   The records of the namespace's claims and templates (the
#   ResourceClaimSpec of each, by record key); empty when there are none.
claim_records := records if {
	records := data.fleetplane.claims[namespace]
	is_object(records)
} else := {}

# Where a claim object's ResourceClaimSpec is: a claim's spec, a template's
# spec.spec.
claim_spec_paths := {"ResourceClaim": ["spec"], "ResourceClaimTemplate": ["spec", "spec"]}

# ------------------------------------------------------------ claim objects

deny contains msg if {
	object.get(input.request.kind, "group", "") == "resource.k8s.io"
	path := claim_spec_paths[input.request.kind.kind]
	input.request.operation in {"CREATE", "UPDATE"}
	object.get(input.request, "subResource", "") == ""
	judged_namespace
	some problem in claims.problems(object.get(input.request.object, path, {}))
	msg := sprintf(
		"dra-claim: %s %s %s",
		[input.request.kind.kind, json.marshal(object.get(input.request.object, ["metadata", "name"], "")), problem],
	)
}

# ----------------------------------------------------- pods that use claims

# The references of every template's pods, judged where the pod rules are.
claim_references contains [f, c] if {
	pod_rules_apply
	some f in facts
	some c in claims.references(f.spec, claim_records)
}

deny contains msg if {
	some [f, c] in claim_references
	not c.record
	msg := sprintf(
		"dra-claim: %s uses %s, of which the gate has no record (data.fleetplane.claims, kept by the controller), so it cannot count the devices it holds; create the claim or template first and retry once the controller has recorded it (a workload's controller retries on its own)",
		[f.where, claim_name(c)],
	)
}

deny contains msg if {
	some [f, c] in claim_references
	some problem in claims.problems(c.record)
	msg := sprintf("dra-claim: %s uses %s, whose %s", [f.where, claim_name(c), problem])
}

# One product per pod: the product is judged as the node's model label, and a
# node has one.
deny contains msg if {
	pod_rules_apply
	some f in facts
	products := claims.claimed_products(f.spec, claim_records)
	count(products) > 1
	msg := sprintf(
		"dra-claim: %s claims GPUs of %d products (%s); claim one product per pod",
		[f.where, count(products), concat(", ", sort(products))],
	)
}

deny contains msg if {
	pod_rules_apply
	some f in facts
	some product in claims.claimed_products(f.spec, claim_records)
	selected := f.spec.nodeSelector[claims.product_label]
	selected != product
	msg := sprintf(
		"dra-claim: %s selects %s=%s but its claims select productName %s; select one model",
		[f.where, claims.product_label, selected, product],
	)
}

# A claim whose selectors the gate cannot read may allocate any product: the
# model rules then need the pod's own node selection.
deny contains msg if {
	some [f, c] in claim_references
	count(claims.summary(c.record).products) == 0
	claims.summary(c.record).devices > 0
	not f.spec.nodeSelector[claims.product_label]
	some m in config.models
	m.node_label == claims.product_label
	msg := sprintf(
		"dra-claim: %s uses %s, whose selectors pin no product the gate can read, so it may allocate any GPU model; add the selector device.attributes[\"gpu.nvidia.com\"].productName == \"<product>\" to its request (or nodeSelector %s on the pod)",
		[f.where, claim_name(c), claims.product_label],
	)
}

claim_name(c) := sprintf("%s (%s)", [c.where, c.key]) if {
	c.key != ""
} else := c.where
