package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.lib.claims
import data.fleetplane.testing

# ------------------------------------------------------------------ fixtures

h100_product := `device.attributes["gpu.nvidia.com"].productName == "NVIDIA H100 80GB HBM3"`

a100_product := `device.attributes["gpu.nvidia.com"].productName == "NVIDIA A100-SXM4-40GB"`

gpu_request(n, selectors) := {"name": "gpus", "exactly": {
	"deviceClassName": "gpu.nvidia.com",
	"allocationMode": "ExactCount",
	"count": n,
	"selectors": [{"cel": {"expression": e}} | some e in selectors],
}}

claim_spec(requests) := {"devices": {"requests": requests}}

# The records of ml-research: a template of 8 H100s, a shared claim of 2,
# a template without a product, one of another class, and one of All.
claim_records := {"ml-research": {
	"resourceclaimtemplates/eight-h100": claim_spec([gpu_request(8, [h100_product])]),
	"resourceclaimtemplates/a100": claim_spec([gpu_request(1, [a100_product])]),
	"resourceclaims/shared-two": claim_spec([gpu_request(2, [h100_product])]),
	"resourceclaimtemplates/any-gpu": claim_spec([gpu_request(1, [`device.capacity["gpu.nvidia.com"].memory.compareTo(quantity("40Gi")) >= 0`])]),
	"resourceclaimtemplates/all-gpus": claim_spec([{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}]),
	"resourceclaimtemplates/nic": claim_spec([{"name": "n", "exactly": {"deviceClassName": "rdma.example.com"}}]),
}}

claim_deny(rev) := result if {
	result := admission.deny with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.claims as claim_records
		with time.now_ns as testing.now_ns
}

claim_rules(rev) := {split(m, ":")[0] | some m in claim_deny(rev)}

claim_allowed(rev) if {
	admission.allowed with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.claims as claim_records
		with time.now_ns as testing.now_ns
}

claim_message(rev, text) if {
	some m in claim_deny(rev)
	contains(m, text)
}

# A training pod template with no GPU limit and no model selector, using the
# named claims (a template when the name has no "claim:" prefix).
claiming(tmpl, names) := object.union(
	testing.without_spec_field(
		testing.replace_spec(tmpl, "containers", [object.union(
			testing.container("main", {}),
			{"resources": {"claims": [{"name": sprintf("c%d", [i])} | some i, _ in names]}},
		)]),
		"nodeSelector",
	),
	{"spec": {"resourceClaims": [ref |
		some i, name in names
		ref := claim_ref(sprintf("c%d", [i]), name)
	]}},
)

claim_ref(ref_name, name) := {"name": ref_name, "resourceClaimName": substring(name, 6, -1)} if {
	startswith(name, "claim:")
} else := {"name": ref_name, "resourceClaimTemplateName": name}

claiming_training(names) := claiming(testing.training, names)

claim_object(kind, spec) := testing.review(
	{"group": "resource.k8s.io", "version": "v1", "kind": kind},
	"ml-research",
	{"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": "c", "namespace": "ml-research"}, "spec": spec},
)

# A Deployment of replicas pods of a template.
deployment_of(tmpl, replicas) := testing.review(
	{"group": "apps", "version": "v1", "kind": "Deployment"},
	"ml-research",
	{
		"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d", "namespace": "ml-research"},
		"spec": {"replicas": replicas, "template": testing.queued_in(tmpl, "ml-research")},
	},
)

# ----------------------------------------------------------- claim objects

claim_object_cases := {
	"a template of 8 H100s": [claim_object("ResourceClaimTemplate", {"spec": claim_spec([gpu_request(8, [h100_product])])}), set()],
	"a claim of 2": [claim_object("ResourceClaim", claim_spec([gpu_request(2, [])])), set()],
	"all devices of a node": [claim_object("ResourceClaimTemplate", {"spec": claim_records["ml-research"]["resourceclaimtemplates/all-gpus"]}), {"dra-claim"}],
	"another class": [claim_object("ResourceClaim", claim_records["ml-research"]["resourceclaimtemplates/nic"]), {"dra-claim"}],
	"prioritized alternatives": [claim_object("ResourceClaim", claim_spec([{"name": "g", "firstAvailable": [{"name": "a", "deviceClassName": "gpu.nvidia.com"}]}])), {"dra-claim"}],
	"admin access": [claim_object("ResourceClaim", claim_spec([{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "adminAccess": true}}])), {"dra-claim"}],
	"a fraction": [claim_object("ResourceClaim", claim_spec([gpu_request(0.5, [])])), {"dra-claim"}],
	"in the platform's namespace": [
		testing.review(
			{"group": "resource.k8s.io", "version": "v1", "kind": "ResourceClaim"},
			"fleetplane-system",
			{"metadata": {"name": "c"}, "spec": claim_records["ml-research"]["resourceclaimtemplates/nic"]},
		),
		set(),
	],
}

test_claim_objects[name] if {
	some name, [rev, want] in claim_object_cases
	claim_rules(rev) == want
}

test_claim_object_messages_say_what_to_change if {
	claim_message(claim_object_cases["all devices of a node"][0], `ResourceClaimTemplate "c" devices.requests[0] ("g") uses allocationMode All, which allocates every matching device of a node, so nothing bounds what it holds; use allocationMode ExactCount with a count`)
	claim_message(claim_object_cases["another class"][0], `asks for DeviceClass "rdma.example.com", whose devices the gate cannot count; request GPUs from DeviceClass gpu.nvidia.com`)
}

# ------------------------------------------------------------ pods

pod_claim_cases := {
	# 8 H100s through a template: the valid training pod, as with nvidia.com/gpu.
	"a template of 8 H100s": [testing.pod(claiming_training(["eight-h100"])), set()],
	"a shared claim": [testing.pod(claiming_training(["claim:shared-two"])), set()],
	# A claim without a readable product selects no model.
	"no readable product": [testing.pod(claiming_training(["any-gpu"])), {"dra-claim", "accelerator-model"}],
	"no record": [testing.pod(claiming_training(["unknown"])), {"dra-claim"}],
	"a recorded claim of All": [testing.pod(claiming_training(["all-gpus"])), {"dra-claim"}],
	"a recorded claim of another class": [testing.pod(claiming_training(["nic"])), {"dra-claim"}],
	"two products": [testing.pod(claiming_training(["eight-h100", "a100"])), {"dra-claim", "accelerator-model"}],
	# The product may also be selected on the pod, when it agrees.
	"the product selected on the pod too": [testing.pod(testing.with_spec(claiming_training(["eight-h100"]), {"nodeSelector": testing.h100})), set()],
	"a different product selected on the pod": [testing.pod(testing.with_spec(claiming_training(["eight-h100"]), {"nodeSelector": testing.a100})), {"dra-claim"}],
	# Without a model selection on the claim, the pod's own selection decides.
	"no readable product, the pod selects one": [testing.pod(testing.with_spec(claiming_training(["any-gpu"]), {"nodeSelector": testing.h100})), set()],
}

test_pods_with_claims[name] if {
	some name, [rev, want] in pod_claim_cases
	claim_rules(rev) == want
}

test_a_pod_with_a_claim_is_admitted if claim_allowed(pod_claim_cases["a template of 8 H100s"][0])

# The claim's devices meet the workload rules as nvidia.com/gpu: 9 pods of 8
# claimed GPUs exceed team research's 64, exactly as 9 pods of 8
# nvidia.com/gpu do.
test_claimed_gpus_meet_the_maximum if {
	claimed := claim_rules(deployment_of(claiming_training(["eight-h100"]), 9))
	limited := claim_rules(deployment_of(testing.training, 9))
	claimed == limited
	"max-accelerators" in claimed
	claim_rules(deployment_of(claiming_training(["eight-h100"]), 8)) == claim_rules(deployment_of(testing.training, 8))
}

# The claim's GPUs are the pod's demand and its product the pod's model
# selection, which every model and pool rule reads.
test_the_claimed_product_is_the_model if {
	facts := admission.facts with input as testing.pod(claiming_training(["eight-h100"]))
		with data.fleetplane.config as testing.config
		with data.fleetplane.claims as claim_records
	facts[0].demand == {claims.claimed_resource: 8}
	facts[0].spec.nodeSelector == testing.h100
}

test_a_missing_record_fails_closed if {
	claim_message(pod_claim_cases["no record"][0], `uses spec.resourceClaims[0] ("c0") (resourceclaimtemplates/unknown), of which the gate has no record`)
	not admission.allowed with input as pod_claim_cases["a template of 8 H100s"][0]
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

test_summary_reads_count_and_product if {
	s := claims.summary(claim_spec([gpu_request(4, [h100_product, `device.attributes["gpu.nvidia.com"].memory > 1`]), gpu_request(2, [])]))
	s.devices == 6
	s.products == {"NVIDIA H100 80GB HBM3"}
	s.problems == set()
	claims.summary(claim_spec([{"name": "x", "exactly": {"deviceClassName": "gpu.nvidia.com"}}])).devices == 1
}

# A pod that uses a claim is an accelerator workload even before the gate
# knows what the claim holds (it used to be refused by accelerator-access).
test_a_cpu_pod_with_an_unrecorded_claim_is_refused if {
	rev := testing.pod(testing.with_spec(testing.cpu, {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}))
	"dra-claim" in claim_rules(rev)
	claim_message(rev, `dra-claim: pod uses spec.resourceClaims[0] ("gpu") (resourceclaimtemplates/one-gpu), of which the gate has no record`)
	not claim_allowed(rev)
}
