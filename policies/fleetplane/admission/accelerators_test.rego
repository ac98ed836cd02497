package fleetplane.admission_test

import data.fleetplane.testing

# Shorthands for the templates of the fixtures.
training := testing.training

inference := testing.inference

notebook := testing.notebook

batch := testing.batch

gpu_limits(q) := {"nvidia.com/gpu": q}

# ------------------------------------------------------------ quantities

malformed_quantities := {
	"fraction": "1.5",
	"negative": "-1",
	"exponent": "1e3",
	"hex": "0x2",
	"word": "abc",
	"milli": "1500m",
	"suffix": "1k",
	"leading zero": "01",
	"empty": "",
	"number fraction": 1.5,
	"number negative": -1,
	"null": null,
	"boolean": true,
}

test_malformed_quantity_is_denied[name] if {
	some name, q in malformed_quantities
	rules(testing.pod(testing.with_limits(training, gpu_limits(q)))) == {"malformed-quantity"}
}

test_malformed_request_quantity_is_denied[name] if {
	some name, q in malformed_quantities
	rev := testing.pod(testing.with_resources(training, {"limits": gpu_limits("1"), "requests": gpu_limits(q)}))
	rules(rev) == {"malformed-quantity"}
}

test_malformed_mig_and_tpu_quantities_are_denied[resource] if {
	some resource in ["nvidia.com/mig-1g.10gb", "google.com/tpu"]
	rules(testing.pod(testing.with_limits(training, {resource: "0.5"}))) == {"malformed-quantity"}
}

test_malformed_quantity_message_names_container_and_value if {
	some_message(testing.pod(testing.with_limits(training, gpu_limits("1.5"))), `pod containers "main": limits[nvidia.com/gpu] "1.5" is not a whole number`)
}

well_formed_quantities := {"string": "2", "number": 2, "zero": "0"}

test_well_formed_quantity_is_allowed[name] if {
	some name, q in well_formed_quantities
	deny(testing.pod(testing.with_limits(training, gpu_limits(q)))) == set()
}

# ---------------------------------------------------------------- limits

limit_cases := {
	"request without limit": {"requests": gpu_limits("1")},
	"request below limit": {"requests": gpu_limits("1"), "limits": gpu_limits("2")},
	"request above limit": {"requests": gpu_limits("4"), "limits": gpu_limits("2")},
	"tpu request without limit": {"requests": {"google.com/tpu": "4"}},
}

test_limit_problem_is_denied[name] if {
	some name, resources in limit_cases
	rules(testing.pod(testing.with_resources(training, resources))) == {"accelerator-limits"}
}

test_request_equal_to_limit_is_allowed if {
	deny(testing.pod(testing.with_resources(training, {"requests": gpu_limits("8"), "limits": gpu_limits(8)}))) == set()
}

test_cpu_request_without_limit_is_not_an_accelerator_problem if {
	deny(testing.pod(testing.with_resources(training, {"requests": {"cpu": "4"}, "limits": gpu_limits("1")}))) == set()
}

# --------------------------------------------------------- workload type

workload_type_cases := {
	"missing label": testing.pod(testing.with_spec(object.remove(training, ["metadata"]), {})),
	"unknown type": testing.pod(testing.with_labels(training, {testing.type_label: "research"})),
	"mixed types": testing.volcano([["train", 1, training], ["nb", 1, notebook]]),
	"unlabelled task": testing.volcano([["train", 1, training], ["sidecar", 1, testing.cpu]]),
}

test_workload_type_problem_is_denied[name] if {
	some name, rev in workload_type_cases
	rules(rev) == {"workload-type"}
}

test_workload_type_message_lists_known_types if {
	some_message(workload_type_cases["missing label"], "add it to the pod template labels with one of: batch, inference, notebook, training")
}

# ------------------------------------------------------------------ team

test_accelerators_outside_team_namespaces_are_denied if {
	rules(testing.pod_in(training, "default")) == {"team"}
}

test_cpu_pod_outside_team_namespaces_is_allowed if {
	rev := testing.pod_in(testing.with_spec(testing.cpu, {"hostNetwork": true, "containers": [{"name": "x", "image": "ubuntu"}]}), "default")
	deny(rev) == set()
	allowed(rev)
}

# ---------------------------------------------------------------- models

tpu_limits := {"google.com/tpu": "4"}

affinity(terms) := {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}}}}

gpu_in(values) := {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In", "values": values}]}

no_selector(tmpl) := testing.without_spec_field(tmpl, "nodeSelector")

model_cases := {
	"no selector": {"input": testing.pod(no_selector(training)), "want": {"accelerator-model"}},
	"unknown model": {
		"input": testing.pod(testing.with_spec(training, {"nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"}})),
		"want": {"accelerator-model"},
	},
	"model not allowed for team": {"input": testing.pod_in(training, "analytics"), "want": {"accelerator-model"}},
	"affinity with allowed models": {
		"input": testing.pod(testing.with_spec(no_selector(training), affinity([gpu_in(["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB"])]))),
		"want": set(),
	},
	"affinity admitting a disallowed model": {
		"input": testing.pod_in(testing.with_spec(no_selector(training), affinity([gpu_in(["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-40GB"])])), "analytics"),
		"want": {"accelerator-model"},
	},
	"affinity term leaving the model open": {
		"input": testing.pod(testing.with_spec(no_selector(training), affinity([gpu_in(["NVIDIA-H100-80GB-HBM3"]), {"matchExpressions": []}]))),
		"want": {"accelerator-model"},
	},
	"affinity with NotIn": {
		"input": testing.pod(testing.with_spec(no_selector(training), affinity([{"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "NotIn", "values": ["Tesla-T4"]}]}]))),
		"want": {"accelerator-model"},
	},
	"tpu with its selector": {"input": testing.pod(testing.with_spec(testing.with_limits(training, tpu_limits), {"nodeSelector": testing.tpu})), "want": set()},
	"tpu with a gpu selector": {"input": testing.pod(testing.with_limits(training, tpu_limits)), "want": {"accelerator-model"}},
	"mig device on an allowed model": {
		"input": testing.pod(testing.with_spec(testing.with_limits(training, {"nvidia.com/mig-3g.20gb": "2"}), {"nodeSelector": testing.a100})),
		"want": set(),
	},
	"mig device without a model": {"input": testing.pod(no_selector(testing.with_limits(training, {"nvidia.com/mig-3g.20gb": "2"}))), "want": {"accelerator-model"}},
}

test_accelerator_model[name] if {
	some name, tc in model_cases
	rules(tc.input) == tc.want
}

test_model_message_names_label_and_team_default if {
	some_message(
		model_cases["no selector"].input,
		"add nodeSelector nvidia.com/gpu.product: NVIDIA-A100-SXM4-40GB (team default), or another allowed model: nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB, nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3",
	)
}

test_model_message_for_another_family_names_the_label if {
	some_message(model_cases["tpu with a gpu selector"].input, "add nodeSelector cloud.google.com/gke-tpu-accelerator: <model> (team default), or another allowed model: cloud.google.com/gke-tpu-accelerator=tpu-v5-lite-podslice")
}

test_unknown_model_message_lists_known_values if {
	some_message(model_cases["unknown model"].input, "known values: NVIDIA-A100-SXM4-40GB, NVIDIA-H100-80GB-HBM3")
}

test_disallowed_model_message_names_team if {
	some_message(model_cases["model not allowed for team"].input, "may land on h100-80gb, which team analytics may not use")
}

# ------------------------------------------------------------------ size

size_cases := {
	"notebook with two gpus": {"input": testing.pod(testing.with_limits(notebook, gpu_limits("2"))), "want": {"max-accelerators"}},
	"notebook with one gpu": {"input": testing.pod(notebook), "want": set()},
	"training over the limit": {"input": testing.deployment(training, 9), "want": {"max-accelerators", "approval"}},
	"large training without approval": {"input": testing.job(training, {"parallelism": 4}), "want": {"approval"}},
	"large training with approval": {
		"input": testing.job(testing.with_annotations(training, {"fleetplane.dev/approval-id": "APR-2026-001"}), {"parallelism": 4}),
		"want": set(),
	},
	"large training with an unknown approval": {
		"input": testing.job(testing.with_annotations(training, {"fleetplane.dev/approval-id": "APR-1999-999"}), {"parallelism": 4}),
		"want": {"approval"},
	},
	"just under the approval threshold": {"input": testing.volcano([["a", 3, training], ["b", 7, testing.with_limits(training, gpu_limits("1"))]]), "want": set()},
	"approval on one task only": {
		"input": testing.volcano([
			["a", 3, testing.with_annotations(training, {"fleetplane.dev/approval-id": "APR-2026-001"})],
			["b", 8, testing.with_limits(training, gpu_limits("1"))],
		]),
		"want": {"approval"},
	},
}

test_size[name] if {
	some name, tc in size_cases
	rules(tc.input) == tc.want
}

test_max_message_says_what_to_change if {
	some_message(size_cases["notebook with two gpus"].input, "the workload holds 2 accelerators at once (replicas x devices per pod); notebook workloads may hold at most 1")
}

test_approval_message_names_the_template if {
	some_message(size_cases["approval on one task only"].input, "set annotation fleetplane.dev/approval-id on spec.tasks[1].template to an approved request id")
}

test_node_name_is_denied if {
	rules(testing.pod(testing.with_spec(training, {"nodeName": "gpu-node-1"}))) == {"node-name"}
}

# ------------------------------------------------------------- capacity

spot_affinity(key, values) := affinity([{"matchExpressions": [{"key": key, "operator": "In", "values": values}]}])

capacity_cases := {
	"inference tolerating spot": {"input": testing.pod(testing.with_spec(inference, {"tolerations": [testing.spot_toleration]})), "want": {"capacity-type"}},
	"inference tolerating everything": {"input": testing.pod(testing.with_spec(inference, {"tolerations": [{"operator": "Exists"}]})), "want": {"capacity-type"}},
	"inference tolerating the spot key": {
		"input": testing.pod(testing.with_spec(inference, {"tolerations": [{"key": "fleetplane.dev/capacity-type", "operator": "Exists"}]})),
		"want": {"capacity-type"},
	},
	"inference tolerating another taint": {
		"input": testing.pod(testing.with_spec(inference, {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]})),
		"want": set(),
	},
	"inference tolerating spot for NoExecute only": {
		"input": testing.pod(testing.with_spec(inference, {"tolerations": [object.union(testing.spot_toleration, {"effect": "NoExecute"})]})),
		"want": set(),
	},
	"inference selecting spot": {"input": testing.pod(testing.with_spec(inference, {"nodeSelector": object.union(testing.h100, {"cloud.google.com/gke-spot": "true"})})), "want": {"capacity-type"}},
	"inference admitting spot by affinity": {
		"input": testing.pod(testing.with_spec(inference, spot_affinity("karpenter.sh/capacity-type", ["on-demand", "spot"]))),
		"want": {"capacity-type"},
	},
	"inference on demand": {"input": testing.pod(inference), "want": set()},
	"batch with a toleration only": {
		"input": testing.pod(testing.replace_spec(batch, "nodeSelector", testing.a100)),
		"want": {"capacity-type"},
	},
	"batch pinned by affinity": {
		"input": testing.pod(testing.with_spec(testing.replace_spec(batch, "nodeSelector", testing.a100), spot_affinity("eks.amazonaws.com/capacityType", ["SPOT"]))),
		"want": set(),
	},
	"batch with affinity admitting on-demand": {
		"input": testing.pod(testing.with_spec(testing.replace_spec(batch, "nodeSelector", testing.a100), spot_affinity("eks.amazonaws.com/capacityType", ["SPOT", "ON_DEMAND"]))),
		"want": {"capacity-type"},
	},
	"batch on spot": {"input": testing.pod(batch), "want": set()},
}

test_capacity_type[name] if {
	some name, tc in capacity_cases
	rules(tc.input) == tc.want
}

test_capacity_messages_say_what_to_change if {
	some_message(capacity_cases["inference tolerating spot"].input, "remove the spot node selector, affinity and the toleration of fleetplane.dev/capacity-type")
	some_message(capacity_cases["batch with a toleration only"].input, "add nodeSelector fleetplane.dev/capacity-type: spot")
}

# -------------------------------------------------------- priority class

priority_cases := {
	"missing": {"input": testing.pod(testing.without_spec_field(training, "priorityClassName")), "want": {"priority-class"}},
	"another type's class": {"input": testing.pod(testing.with_spec(notebook, {"priorityClassName": "fleetplane-training"})), "want": {"priority-class"}},
	"second allowed class": {"input": testing.pod(testing.with_spec(training, {"priorityClassName": "fleetplane-training-high"})), "want": set()},
}

test_priority_class[name] if {
	some name, tc in priority_cases
	rules(tc.input) == tc.want
}

test_priority_message_lists_allowed_classes if {
	some_message(priority_cases.missing.input, "priority-class: pod has priorityClassName null; training workloads must use one of: fleetplane-training, fleetplane-training-high")
}

# ----------------------------------------------------------- checkpoint

spot_training := testing.with_spec(training, {"tolerations": [testing.spot_toleration]})

checkpoint_cases := {
	"spot training without checkpoint": {"input": testing.pod(spot_training), "want": {"checkpoint"}},
	"spot training with checkpoint": {
		"input": testing.pod(testing.with_annotations(spot_training, {"fleetplane.dev/checkpoint-location": "s3://ckpt/run-1"})),
		"want": set(),
	},
	"spot training with a non-uri checkpoint": {
		"input": testing.pod(testing.with_annotations(spot_training, {"fleetplane.dev/checkpoint-location": "somewhere"})),
		"want": {"checkpoint"},
	},
	"on-demand training without checkpoint": {"input": testing.pod(training), "want": set()},
	"spot batch without checkpoint": {"input": testing.pod(batch), "want": set()},
}

test_checkpoint[name] if {
	some name, tc in checkpoint_cases
	rules(tc.input) == tc.want
}

# --------------------------------------------------------- idle timeout

idle_cases := {
	"missing": {"input": testing.pod(object.union(notebook, {"metadata": {"annotations": {"fleetplane.dev/idle-timeout-seconds": null}}})), "want": {"idle-timeout"}},
	"at the maximum": {"input": testing.pod(testing.with_annotations(notebook, {"fleetplane.dev/idle-timeout-seconds": "14400"})), "want": set()},
	"over the maximum": {"input": testing.pod(testing.with_annotations(notebook, {"fleetplane.dev/idle-timeout-seconds": "14401"})), "want": {"idle-timeout"}},
	"zero": {"input": testing.pod(testing.with_annotations(notebook, {"fleetplane.dev/idle-timeout-seconds": "0"})), "want": {"idle-timeout"}},
	"not a number": {"input": testing.pod(testing.with_annotations(notebook, {"fleetplane.dev/idle-timeout-seconds": "1h"})), "want": {"idle-timeout"}},
	"training needs none": {"input": testing.pod(training), "want": set()},
}

test_idle_timeout[name] if {
	some name, tc in idle_cases
	rules(tc.input) == tc.want
}

test_idle_message_gives_the_range if {
	some_message(idle_cases["over the maximum"].input, "a whole number of seconds from 1 to 14400")
}

# ---------------------------------------------------------- every rule

test_every_violation_is_reported_at_once if {
	rev := testing.pod(testing.with_spec(testing.with_limits(notebook, gpu_limits("2")), {
		"priorityClassName": "fleetplane-batch",
		"nodeName": "n1",
		"hostIPC": true,
	}))
	rules(rev) == {"max-accelerators", "priority-class", "node-name", "host-namespaces"}
}
