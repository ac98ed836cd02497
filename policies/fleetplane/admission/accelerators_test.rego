package fleetplane.admission_test

import data.fleetplane.admission
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
	"missing label": testing.pod(testing.with_spec(json.remove(training, ["metadata/labels"]), {})),
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

# Issue 19: a namespace of no team is judged too (it was not): the security
# rules apply there; only the platform's own namespaces are left alone.
test_cpu_pod_outside_team_namespaces_is_judged if {
	rev := testing.pod_in(testing.with_spec(testing.cpu, {"hostNetwork": true, "containers": [{"name": "x", "image": "ubuntu"}]}), "default")
	rules(rev) == {"host-namespaces", "image-registry"}
}

test_cpu_pod_in_a_system_namespace_is_not_judged if {
	rev := testing.pod_in(testing.with_spec(testing.cpu, {"hostNetwork": true, "containers": [{"name": "x", "image": "ubuntu"}]}), "kube-system")
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
	"inference tolerating everything": {"input": testing.pod(testing.with_spec(inference, {"tolerations": [{"operator": "Exists"}]})), "want": {"capacity-type", "maintenance-toleration", "burst-toleration"}},
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

# ------------------------------------------------------------- approvals

approval_annotation(id) := {"fleetplane.dev/approval-id": id}

# A Job of 4 x 8 GPUs (32, at the approval threshold) carrying an approval id.
approved_job(id) := testing.job(testing.with_annotations(training, approval_annotation(id)), {"parallelism": 4})

approvals_with(entry) := {"APR-X": entry}

approval := {"team": "research", "max_accelerators": 32, "expires_at": testing.now + 60, "uid": null}

deny_with_approvals(rev, approvals) := result if {
	result := admission.deny with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

approval_cases := {
	"granted to the team, large enough, unexpired": [approval, set()],
	"granted to another team": [object.union(approval, {"team": "serving"}), {"approval"}],
	"too small": [object.union(approval, {"max_accelerators": 16}), {"approval"}],
	"expired": [object.union(approval, {"expires_at": testing.now}), {"approval"}],
	"bound to another workload": [object.union(approval, {"uid": "uid-other"}), {"approval"}],
	"bound to this workload's owner": [object.union(approval, {"uid": "uid-cron"}), set()],
	"malformed": [object.union(approval, {"max_accelerators": "32"}), {"approval"}],
}

# The Job is owned by a CronJob of uid uid-cron, whose controller creates it
# (only controllers write owner references: owners.rego).
owned_job(id) := testing.by(
	object.union(approved_job(id), {"request": {"object": {"metadata": {"uid": "uid-job", "ownerReferences": [{"kind": "CronJob", "name": "c", "uid": "uid-cron"}]}}}}),
	"system:serviceaccount:kube-system:cronjob-controller", [],
)

test_approvals[name] if {
	some name, [entry, want] in approval_cases
	{split(m, ":")[0] | some m in deny_with_approvals(owned_job("APR-X"), approvals_with(entry))} == want
}

approval_reasons := {
	"granted to another team": `approval "APR-X" was granted to team serving, not to team research`,
	"too small": `approval "APR-X" covers at most 16 accelerators`,
	"expired": `approval "APR-X" expired at 2026-11-18T11:06:40Z`,
	"bound to another workload": `approval "APR-X" is bound to another workload (uid uid-other)`,
	"malformed": `approval "APR-X" is malformed in data.fleetplane.approvals`,
}

test_approval_reasons[name] if {
	some name, reason in approval_reasons
	some m in deny_with_approvals(owned_job("APR-X"), approvals_with(approval_cases[name][0]))
	contains(m, reason)
}

test_unknown_approval_reason if {
	some m in deny(approved_job("APR-1999-999"))
	contains(m, `approval "APR-1999-999" on spec.template is unknown`)
}

test_approval_list_in_the_configuration_is_not_read if {
	config := object.union(testing.config, {"approval": {"approved_ids": ["APR-X"]}})
	msgs := admission.deny with input as approved_job("APR-X")
		with data.fleetplane.config as config
		with data.fleetplane.approvals as {}
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	some m in msgs
	startswith(m, "approval:")
}

test_object_uids if {
	admission.object_uids == {"uid-job", "uid-cron"} with input as owned_job("APR-X")
}

# ------------------------------------------------------------------ pools

# h100-spot reserved for team serving, a100-on-demand for research.
reserved_pools := object.union(testing.config, {"reserved_pools": {
	"h100-spot": ["serving"],
	"a100-on-demand": ["research"],
}})

rules_with_pools(rev) := {split(m, ":")[0] | some m in result} if {
	result := admission.deny with input as rev
		with data.fleetplane.config as reserved_pools
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

spot_h100_training := testing.with_annotations(
	testing.with_spec(training, {"nodeSelector": object.union(testing.h100, testing.spot_selector), "tolerations": [testing.spot_toleration]}),
	{"fleetplane.dev/checkpoint-location": "s3://c/r"},
)

pool_cases := {
	"a spot template on a pool reserved for another team": [testing.pod(spot_h100_training), {"pool"}],
	"an on-demand template cannot land on the spot pool": [testing.pod(training), set()],
	"the team that owns the pool": [testing.pod_in(testing.with_spec(testing.inference, {"tolerations": []}), "ml-serving"), set()],
	"a model whose pool is the team's own": [testing.pod(testing.with_spec(training, {"nodeSelector": testing.a100})), set()],
	"another team on a pool reserved for research": [testing.pod_in(testing.with_spec(testing.inference, {"nodeSelector": testing.a100}), "ml-serving"), {"pool"}],
	"a template selecting an open pool by name": [
		testing.pod(testing.with_spec(spot_h100_training, {"nodeSelector": object.union(object.union(testing.h100, testing.spot_selector), {"fleetplane.dev/pool": "h100-on-demand-open"})})),
		set(),
	],
}

test_pools[name] if {
	some name, [rev, want] in pool_cases
	rules_with_pools(rev) == want
}

test_pool_message_names_the_pool_and_the_way_out if {
	msgs := admission.deny with input as testing.pod(spot_h100_training)
		with data.fleetplane.config as reserved_pools
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	"pool: pod may land on pool h100-spot (h100-80gb), which is reserved for teams serving; no pool open to team research has that model; select another model" in msgs
}

test_pool_message_lists_open_pools if {
	config := object.union(reserved_pools, {"pools": {"h100-open": {"model": "h100-80gb", "capacity_type": "spot", "teams": []}}})
	msgs := admission.deny with input as testing.pod(spot_h100_training)
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	some m in msgs
	endswith(m, "select pools open to team research with nodeSelector fleetplane.dev/pool: one of h100-open")
}

test_pool_teams_that_are_not_a_list_are_nobody_s if {
	admission.pool_teams("research") == `nobody (its teams are "research", not a list)`
}
