# METADATA
# title: DRA claims
# description: >-
#   Reads a ResourceClaimSpec (resource.k8s.io/v1, the version the pinned
#   Kubernetes serves) as a device request the gate can judge: how many
#   devices of NVIDIA's GPU DeviceClass (gpu.nvidia.com) it allocates, which
#   product its CEL selectors pin, and what in it the gate cannot bound. A
#   pod's spec.resourceClaims are resolved through the records of its
#   namespace's claims and templates (data.fleetplane.claims, see
#   docs/contracts.md) and added to the pod's demand as the class's implicit
#   extended resource, so lib/workloads' device counting, the model, pool,
#   approval, maximum, budget and preemption rules judge claimed GPUs as they
#   judge nvidia.com/gpu. Every function takes what it works on; nothing here
#   reads input or data.
package fleetplane.lib.claims

import data.fleetplane.lib
import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   The pod demand key under which claimed GPUs are counted: the implicit
#   extended resource of the GPU DeviceClass, which lib.family prices as
#   nvidia.com/gpu.
claimed_resource := concat("", [lib.dra_extended_resource_prefix, "gpu.nvidia.com"])

# METADATA
# description: >-
#   The node label that names a GPU's product: GPU Feature Discovery writes
#   the product name NVIDIA's driver reports with its spaces replaced by
#   dashes, the same name the DRA driver publishes as the productName
#   attribute. A claim's product is judged as this node selection.
product_label := "nvidia.com/gpu.product"

# A selector the gate reads: one equality on the productName attribute of
# NVIDIA's driver; anything else is CEL the gate does not evaluate.
product_selector := `^\s*device\.attributes\[["']gpu\.nvidia\.com["']\]\.productName\s*==\s*["']([^"']+)["']\s*$`

# METADATA
# description: >-
#   The key of a claim or a template in data.fleetplane.claims[namespace]:
#   "resourceclaims/<name>" or "resourceclaimtemplates/<name>".
record_key(ref) := concat("/", ["resourceclaims", ref.resourceClaimName]) if {
	is_string(ref.resourceClaimName)
} else := concat("/", ["resourceclaimtemplates", ref.resourceClaimTemplateName]) if {
	is_string(ref.resourceClaimTemplateName)
}

requests(claim_spec) := workloads.as_array(object.get(workloads.as_object(claim_spec), ["devices", "requests"], []))

# METADATA
# description: >-
#   What a ResourceClaimSpec asks for: devices (the GPUs it allocates, a
#   request of another class or one the gate cannot bound counting none: it is
#   refused by problems), products (the productName values its selectors
#   pin) and problems (what to change, one message per request).
summary(claim_spec) := {
	"devices": sum([n |
		some r in requests(claim_spec)
		n := request_count(workloads.as_object(r))
	]),
	"products": {p |
		some r in requests(claim_spec)
		some p in request_products(workloads.as_object(r))
	},
	"problems": problems(claim_spec),
}

request_count(r) := n if {
	e := r.exactly
	e.deviceClassName in object.keys(lib.dra_device_classes)
	object.get(e, "allocationMode", "ExactCount") == "ExactCount"
	n := object.get(e, "count", 1)
	workloads.is_whole(n)
} else := 0

request_products(r) := {m[1] |
	some s in workloads.as_array(object.get(r, ["exactly", "selectors"], []))
	expression := s.cel.expression
	is_string(expression)
	some m in regex.find_all_string_submatch_n(product_selector, expression, 1)
}

# METADATA
# description: >-
#   Why a ResourceClaimSpec cannot be judged as a device request, as messages
#   naming the request and what to change.
problems(claim_spec) := {msg |
	some i, r in requests(claim_spec)
	some problem in request_problems(workloads.as_object(r))
	msg := sprintf("devices.requests[%d] (%s) %s", [i, json.marshal(object.get(workloads.as_object(r), "name", "")), problem])
}

request_problems(r) := ((((({"asks for prioritized alternatives (firstAvailable), which the gate does not judge; name one DeviceClass and count under exactly" |
	r.firstAvailable
} | {"has no exactly request; name deviceClassName gpu.nvidia.com and a count under exactly" |
	not r.firstAvailable
	not is_object(r.exactly)
}) | {sprintf("asks for DeviceClass %s, whose devices the gate cannot count; request GPUs from DeviceClass %s", [json.marshal(class), concat(" or ", sort(object.keys(lib.dra_device_classes)))]) |
	class := object.get(r.exactly, "deviceClassName", null)
	not class in object.keys(lib.dra_device_classes)
}) | {"uses allocationMode All, which allocates every matching device of a node, so nothing bounds what it holds; use allocationMode ExactCount with a count" |
	r.exactly.allocationMode == "All"
}) | {sprintf("has allocationMode %s; use ExactCount with a count", [json.marshal(mode)]) |
	mode := r.exactly.allocationMode
	not mode in {"ExactCount", "All"}
}) | {sprintf("has count %s; write a positive whole number of devices", [json.marshal(n)]) |
	n := r.exactly.count
	not workloads.positive_whole(n)
}) | {"asks for adminAccess, which reaches devices other pods hold; team workloads may not" |
	r.exactly.adminAccess == true
}

# METADATA
# description: >-
#   The pod's spec.resourceClaims, each {where, key, record}: record is the
#   ResourceClaimSpec the namespace's records hold under key (absent when the
#   gate has no record of it).
references(spec, records) := [c |
	some i, ref in workloads.as_array(object.get(spec, "resourceClaims", []))
	key := object.get({"k": record_key(workloads.as_object(ref))}, "k", "")
	c := object.union(
		{"where": sprintf("spec.resourceClaims[%d] (%s)", [i, json.marshal(object.get(workloads.as_object(ref), "name", ""))]), "key": key},
		{"record": record | record := records[key]},
	)
]

# METADATA
# description: >-
#   A pod's demand with its claims: the GPUs of every claim the pod references
#   (each counted once per pod, however many of its containers use it) added
#   to the implicit extended resource of the GPU DeviceClass. A claim shared
#   by several pods is counted in each: the gate cannot see the others, so it
#   counts high, never low. Unchanged for a pod without claims.
with_claims(demand, spec, records) := demand if {
	object.get(spec, "resourceClaims", []) == []
} else := object.union(demand, {claimed_resource: object.get(demand, claimed_resource, 0) + claimed}) if {
	claimed := sum([n |
		some c in references(spec, records)
		n := summary(c.record).devices
	])
} else := demand

# METADATA
# description: >-
#   The products the pod's claims pin, as the label values of product_label.
claimed_products(spec, records) := {replace(p, " ", "-") |
	some c in references(spec, records)
	some p in summary(c.record).products
}

# METADATA
# description: >-
#   A pod spec with its claims' product as a node selection, so the model and
#   pool rules judge it as they judge nvidia.com/gpu.product in nodeSelector:
#   a claim allocates devices only on nodes whose driver publishes them, so the
#   product its selector pins is the model the pod lands on. Unchanged without
#   claims, when the claims pin no product or more than one (refused by the
#   claim rules), or when the pod selects the label itself (a different value
#   is refused by the claim rules).
with_claimed_model(spec, records) := spec if {
	object.get(spec, "resourceClaims", []) == []
} else := object.union(spec, {"nodeSelector": {product_label: value}}) if {
	products := claimed_products(spec, records)
	count(products) == 1
	some value in products
	not workloads.as_object(object.get(spec, "nodeSelector", {}))[product_label]
} else := spec
