package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# ---------------------------------------------------------------- harness

deny(rev) := result if {
	result := admission.deny with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

# The names of the violated rules (the text before the first colon).
rules(rev) := {split(m, ":")[0] | some m in deny(rev)}

allowed(rev) if {
	admission.allowed with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

eval(rev, rule) := result if {
	result := admission[rule] with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

# One message of a review containing text.
some_message(rev, text) if {
	some m in deny(rev)
	contains(m, text)
}

# --------------------------------------------------------------- envelope

valid_pod := testing.pod(testing.training)

envelope_cases := {
	"not an object": {"input": [1], "want": "the body must be an AdmissionReview object"},
	"wrong apiVersion": {
		"input": object.union(valid_pod, {"apiVersion": "admission.k8s.io/v1beta1"}),
		"want": "apiVersion must be admission.k8s.io/v1",
	},
	"wrong kind": {"input": object.union(valid_pod, {"kind": "Review"}), "want": "kind must be AdmissionReview"},
	"no request": {"input": object.remove(valid_pod, ["request"]), "want": "request is missing"},
	"no uid": {"input": object.union(valid_pod, {"request": {"uid": ""}}), "want": "request.uid must be a non-empty string"},
	"no kind": {"input": object.union(valid_pod, {"request": {"kind": "Pod"}}), "want": "request.kind must be {group, version, kind}"},
	"bad operation": {
		"input": object.union(valid_pod, {"request": {"operation": "PATCH"}}),
		"want": "request.operation must be one of CONNECT, CREATE, DELETE, UPDATE",
	},
	"no object": {"input": object.union(valid_pod, {"request": {"object": null}}), "want": "request.object must be the object under review"},
	"no namespace": {
		"input": object.union(valid_pod, {"request": {"namespace": "", "object": {"metadata": {"namespace": ""}}}}),
		"want": "request.namespace is missing",
	},
}

test_envelope_problem_is_denied[name] if {
	some name, tc in envelope_cases
	sprintf("malformed-request: %s", [tc.want]) in deny(tc.input)
	not allowed(tc.input)
}

test_valid_review_has_no_envelope_problem if {
	count(eval(valid_pod, "envelope_problems")) == 0
	allowed(valid_pod)
}

test_uid_is_echoed if eval(valid_pod, "uid") == "705ab4f5-6393-11e8-b7cc-42010a800002"

test_uid_is_empty_without_request if eval({}, "uid") == ""

test_namespace_falls_back_to_object_metadata if {
	rev := object.union(valid_pod, {"request": {"namespace": "", "object": {"metadata": {"namespace": "ml-research"}}}})
	eval(rev, "namespace") == "ml-research"
}

# ------------------------------------------------------------------ scope

mode_cases := {
	"pod create": {"input": valid_pod, "want": "full"},
	"pod update": {"input": testing.as_update(valid_pod, valid_pod.request.object), "want": "changes"},
	"pod ephemeral containers": {
		"input": object.union(testing.as_update(valid_pod, valid_pod.request.object), {"request": {"subResource": "ephemeralcontainers"}}),
		"want": "changes",
	},
	"pod resize": {
		"input": object.union(testing.as_update(valid_pod, valid_pod.request.object), {"request": {"subResource": "resize"}}),
		"want": "changes",
	},
	"deployment update of metadata only": {
		"input": testing.as_update(testing.deployment(testing.training, 1), testing.deployment(testing.training, 1).request.object),
		"want": "metadata",
	},
	"scale": {"input": testing.scale("apps", "statefulsets", "s", "uid-s", 1, 2), "want": "scale"},
	"podgroup": {"input": testing.podgroup({"queue": "research"}), "want": "podgroup"},
	"autoscaler": {"input": testing.autoscaler({"apiVersion": "apps/v1", "kind": "StatefulSet", "name": "s"}, 2), "want": "autoscaler"},
	"system namespace": {"input": testing.pod_in(testing.training, "kube-system"), "want": "none"},
	"pod status": {
		"input": object.union(testing.as_update(valid_pod, valid_pod.request.object), {"request": {"subResource": "status"}}),
		"want": "none",
	},
	"pod delete": {"input": object.union(valid_pod, {"request": {"operation": "DELETE", "object": null}}), "want": "none"},
	"deployment update": {"input": testing.as_update(testing.deployment(testing.training, 1), {}), "want": "full"},
	"configmap": {"input": object.union(valid_pod, {"request": {"kind": {"group": "", "version": "v1", "kind": "ConfigMap"}}}), "want": "none"},
}

test_mode[name] if {
	some name, tc in mode_cases
	eval(tc.input, "mode") == tc.want
}

test_workload_update_is_judged_and_allowed if {
	rev := testing.as_update(testing.deployment(testing.training, 1), {})
	deny(rev) == set()
	allowed(rev)
}

test_delete_is_allowed if allowed(object.union(valid_pod, {"request": {"operation": "DELETE", "object": null}}))

test_ungated_kind_is_allowed if allowed(object.union(valid_pod, {"request": {"kind": {"group": "", "version": "v1", "kind": "ConfigMap"}}}))

# ------------------------------------------------------------------ kinds

# Every gated kind is judged on its pod template: a notebook asking for two
# GPUs is denied whatever carries it.
two_gpu_notebook := testing.with_limits(testing.notebook, {"nvidia.com/gpu": "2"})

kind_cases := {
	"pod": testing.pod(two_gpu_notebook),
	"deployment": testing.deployment(two_gpu_notebook, 1),
	"statefulset": testing.statefulset(two_gpu_notebook, 1),
	"replicaset": object.union(testing.deployment(two_gpu_notebook, 1), {"request": {"kind": {"kind": "ReplicaSet"}}}),
	"job": testing.job(two_gpu_notebook, {}),
	"cronjob": testing.cronjob_forbid(two_gpu_notebook, {}),
	"volcano": testing.volcano([["nb", 1, two_gpu_notebook]]),
}

test_every_gated_kind_is_judged[name] if {
	some name, rev in kind_cases
	rules(rev) == {"max-accelerators"}
}

valid_kind_cases := {
	"pod": testing.pod(testing.notebook),
	"deployment": testing.deployment(testing.inference, 2),
	"statefulset": testing.statefulset(testing.training, 1),
	"job": testing.job(testing.training, {"parallelism": 2}),
	"cronjob": testing.cronjob_forbid(testing.training, {}),
	"volcano": testing.volcano([["ps", 1, testing.training], ["worker", 2, testing.training]]),
}

test_valid_workload_is_allowed[name] if {
	some name, rev in valid_kind_cases
	deny(rev) == set()
	allowed(rev)
}

# ------------------------------------------------------------------ facts

total_cases := {
	"pod": {"input": testing.pod(testing.training), "want": 8},
	# 3 replicas and the default surge (25%, rounded up: 1 pod) during a rollout.
	"deployment replicas": {"input": testing.deployment(testing.training, 3), "want": 32},
	"deployment replicas without surge": {
		"input": object.union(testing.deployment(testing.training, 3), {"request": {"object": {"spec": {"strategy": {"type": "Recreate"}}}}}),
		"want": 24,
	},
	"deployment default replicas": {
		"input": object.union(testing.deployment(testing.training, 1), {"request": {"object": {"spec": {"replicas": null}}}}),
		"want": 0,
	},
	"job parallelism": {"input": testing.job(testing.training, {"parallelism": 4}), "want": 32},
	"job completions bound parallelism": {"input": testing.job(testing.training, {"parallelism": 4, "completions": 2}), "want": 16},
	"job default parallelism": {"input": testing.job(testing.training, {}), "want": 8},
	"cronjob parallelism": {"input": testing.cronjob(testing.training, {"parallelism": 2}), "want": 16},
	"volcano tasks": {
		"input": testing.volcano([["ps", 1, testing.with_limits(testing.training, {"nvidia.com/gpu": "1"})], ["worker", 4, testing.training]]),
		"want": 33,
	},
	"zero replicas": {"input": testing.deployment(testing.training, 0), "want": 0},
}

test_total_devices[name] if {
	some name, tc in total_cases
	eval(tc.input, "total_devices") == tc.want
}

test_zero_replicas_is_still_an_accelerator_workload if {
	rev := testing.deployment(testing.with_labels(testing.training, {"fleetplane.dev/workload-type": "unknown"}), 0)
	rules(rev) == {"workload-type"}
}

test_mentioned_but_zero_accelerators_is_judged if {
	rev := testing.pod(testing.with_labels(testing.with_limits(testing.training, {"nvidia.com/gpu": "0"}), {"fleetplane.dev/workload-type": "nope"}))
	rules(rev) == {"workload-type"}
}

deadline_cases := {
	"none": {"input": testing.job(testing.training, {}), "want": null},
	"job level": {"input": testing.job(testing.training, {"activeDeadlineSeconds": 3600}), "want": 3600},
	"pod level": {"input": testing.pod(testing.with_spec(testing.training, {"activeDeadlineSeconds": 600})), "want": 600},
	"shortest wins": {
		"input": testing.job(testing.with_spec(testing.training, {"activeDeadlineSeconds": 600}), {"activeDeadlineSeconds": 3600}),
		"want": 600,
	},
}

test_deadline[name] if {
	some name, tc in deadline_cases
	eval(tc.input, "facts")[0].deadline == tc.want
}

test_workload_type_is_shared_by_every_template if {
	eval(testing.volcano([["a", 1, testing.training], ["b", 1, testing.training]]), "workload_type") == "training"
	not eval(testing.volcano([["a", 1, testing.training], ["b", 1, testing.cpu]]), "workload_type")
}

# ------------------------------------------------------------- evaluation

test_unevaluated_review_is_refused_with_a_message if {
	# A gated pod in a namespace mapped to a team that has no configuration.
	rev := testing.pod_in(testing.training, "orphan")
	msgs := admission.messages with input as rev
		with data.fleetplane.config as object.union(testing.config, {"namespaces": {"orphan": "ghost"}})
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	count(msgs) > 0
	not admission.allowed with input as rev
		with data.fleetplane.config as object.union(testing.config, {"namespaces": {"orphan": "ghost"}})
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

test_messages_fall_back_when_refused_without_deny if {
	msgs := admission.messages with input as valid_pod
		with admission.deny as set()
		with admission.evaluated as false
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
	msgs == [admission.unevaluated_message]
}

test_messages_are_empty_when_allowed if eval(valid_pod, "messages") == []

test_messages_are_the_sorted_deny_messages if {
	rev := testing.pod(testing.with_spec(testing.training, {"priorityClassName": "x", "hostPID": true}))
	msgs := eval(rev, "messages")
	count(msgs) == 2
	msgs == sort(msgs)
}

shape_cases := {
	"pod without containers": {"input": testing.pod(testing.replace_spec(testing.training, "containers", [])), "want": "malformed-request: pod.spec.containers must be a non-empty list"},
	"deployment without template": {
		"input": json.remove(testing.deployment(testing.training, 1), ["request/object/spec/template"]),
		"want": "malformed-request: spec.template is missing",
	},
	"volcano job without tasks": {"input": testing.volcano([]), "want": "malformed-request: spec.tasks must be a non-empty list of tasks"},
}

test_malformed_object_is_denied[name] if {
	some name, tc in shape_cases
	tc.want in deny(tc.input)
	not allowed(tc.input)
}

test_core_group_may_be_left_out if {
	rev := json.remove(valid_pod, ["request/kind/group"])
	allowed(rev)
}
