# The fast path's verdict (fast_verdict.rego): models by affinity, spot
# placement, restricted types and reserved pools, against the full rules.
package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

test_fast_path_takes_models_selected_by_affinity[name] if {
	some name, rev in affinity_cases
	fast(rev, {})
	clean(rev, {})
}

# A pod that may land on several models is priced at the dearest, as the full
# rules price it: the H100's budget warning, not the A100's.
test_fast_path_prices_an_affinity_at_the_dearest_model if {
	spend := spent("research", 39000)
	both := affinity_cases["training accepting two models by affinity"]
	warnings := admission.fast_warnings with input as both
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	warnings == with_spend(testing.pod(training), spend, "warning_list")
	warnings == with_spend(both, spend, "warning_list")
	warnings != with_spend(testing.pod(testing.with_spec(training, {"nodeSelector": testing.a100})), spend, "warning_list")
}

# Pods that accept several models say so with one required node affinity
# expression `In` on the model label (as the replay's pods do): the fast path
# reads that shape, nothing more.
h100_value := testing.h100["nvidia.com/gpu.product"]

a100_value := testing.a100["nvidia.com/gpu.product"]

model_expression(values) := {"key": "nvidia.com/gpu.product", "operator": "In", "values": values}

required_terms(terms) := {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}

# A template that selects its models by affinity (terms), with the nodeSelector
# given (its model label dropped by the caller).
by_affinity(tmpl, selector, terms) := testing.with_spec(testing.replace_spec(tmpl, "nodeSelector", selector), {"affinity": required_terms(terms)})

by_models(tmpl, values) := by_affinity(tmpl, {}, [{"matchExpressions": [model_expression(values)]}])

affinity_cases := {
	"training accepting two models by affinity": testing.pod(by_models(training, [h100_value, a100_value])),
	"training accepting one model by affinity": testing.pod(by_models(training, [a100_value])),
	"inference deployment accepting two models by affinity": testing.deployment(by_models(testing.inference, [a100_value, h100_value]), 2),
	"spot batch accepting two models by affinity": testing.pod(by_affinity(testing.batch, testing.spot_selector, [{"matchExpressions": [model_expression([a100_value, h100_value])]}])),
	"affinity listing a model twice": testing.pod(by_models(training, [h100_value, h100_value])),
}

test_fast_path_leaves_restricted_types_and_reserved_pools_to_the_full_rules[name] if {
	some name in ["restricted training", "reserved pools", "no default runtime"]
	not admission.fast_response with input as testing.pod(training)
		with data.fleetplane.config as contract_configs[name]
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

# fast_spot_placement writes lib's spot labels and the spot taint's key as
# literals (a constant rule costs OPA an evaluation per review): they must
# stay the same names.
test_fast_spot_placement_literals_are_lib_constants if {
	{k | some k, _ in data.fleetplane.lib.spot_node_labels} == {"fleetplane.dev/capacity-type", "karpenter.sh/capacity-type", "eks.amazonaws.com/capacityType", "cloud.google.com/gke-spot"}
	data.fleetplane.lib.spot_taint.key == "fleetplane.dev/capacity-type"
}

test_fast_spot_placement_reads_tolerations_of_the_spot_taint_only[name] if {
	some name, case in {
		"a gpu toleration": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}], "opens": false},
		"the spot taint": {"tolerations": [{"key": "fleetplane.dev/capacity-type", "operator": "Equal", "value": "spot"}], "opens": true},
		"every taint": {"tolerations": [{"operator": "Exists"}], "opens": true},
		"the spot key, another value": {"tolerations": [{"key": "fleetplane.dev/capacity-type", "value": "no"}], "opens": false},
	}
	affinity := {"key": "nvidia.com/gpu.product", "values": ["NVIDIA-A100-SXM4-40GB"]}
	placement := admission.fast_spot_placement({"tolerations": case.tolerations}, {}, affinity)
	placement == {"pins_spot": false, "opens_spot": case.opens}
}
