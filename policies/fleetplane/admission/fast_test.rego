package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# The fast path's contract: it may only say "allowed" where the full rules
# allow, with the very warnings they give, and it does say so for the common
# workloads.

fast(rev, spend) if {
	admission.fast_allowed with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
}

# The full rules allow, with the fast path's warnings.
agrees(rev, spend) if {
	with_spend(rev, spend, "allowed") == true
	with_spend(rev, spend, "warning_list") == with_spend(rev, spend, "fast_warnings")
}

clean(rev, spend) if {
	agrees(rev, spend)
	with_spend(rev, spend, "warning_list") == []
}

common_cases := {
	"training pod": testing.pod(testing.training),
	"inference deployment": testing.deployment(testing.inference, 2),
	"notebook statefulset": testing.statefulset(testing.notebook, 1),
	"spot batch": testing.pod(testing.batch),
	"spot training with checkpoint": testing.pod(testing.with_annotations(
		testing.with_spec(testing.training, {"nodeSelector": object.union(testing.h100, testing.spot_selector), "tolerations": [testing.spot_toleration]}),
		{"fleetplane.dev/checkpoint-location": "s3://ckpt/run"},
	)),
	"training job with a deadline": testing.job(testing.training, {"parallelism": 2, "completions": 4, "activeDeadlineSeconds": 3600}),
	"training cronjob": testing.cronjob_forbid(testing.training, {}),
	"tpu pod": testing.pod(testing.replace_spec(testing.with_limits(testing.training, {"google.com/tpu": "4"}), "nodeSelector", testing.tpu)),
	"request equal to limit": testing.pod(testing.with_resources(testing.training, {"limits": {"nvidia.com/gpu": "2", "cpu": "4"}, "requests": {"nvidia.com/gpu": "2", "cpu": "2"}})),
	"cpu pod in a team namespace": testing.pod(testing.cpu),
	"cpu pod outside the teams": testing.pod_in(testing.cpu, "default"),
	"hardened training pod": testing.pod(testing.with_spec(
		testing.replace_spec(testing.training, "containers", [object.union(testing.container("main", {"nvidia.com/gpu": "8"}), {"securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}, "readOnlyRootFilesystem": true}})]),
		{"securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "fsGroup": 1000, "seccompProfile": {"type": "RuntimeDefault"}}},
	)),
	"cpu pod with probes, env and the default tolerations": testing.pod(testing.with_spec(
		testing.replace_spec(testing.cpu, "containers", [{
			"name": "web", "image": "registry.fleetplane.internal/web:1",
			"env": [{"name": "MODE", "value": "serve"}], "envFrom": [{"configMapRef": {"name": "settings"}}],
			"ports": [{"containerPort": 8080}], "readinessProbe": {"httpGet": {"path": "/ready", "port": 8080}},
		}]),
		{"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]},
	)),
	"training job in waves with retries": testing.job(testing.with_spec(testing.training, {"activeDeadlineSeconds": 3600}), {"parallelism": 2, "completions": 4, "backoffLimit": 1}),
	"gpu pod taking a configmap under a prefix": testing.pod(testing.replace_spec(testing.training, "containers", [object.union(testing.container("main", {"nvidia.com/gpu": "8"}), {"envFrom": [{"configMapRef": {"name": "s"}, "prefix": "APP_"}]})])),
	"operator job with one kind of replica": testing.of_kind("kubeflow.org", "v1", "PyTorchJob", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"}, "spec": {"pytorchReplicaSpecs": {"Worker": {"replicas": 2, "template": testing.training}}}}),
	"user's own annotations": testing.pod(testing.with_annotations(testing.training, {"fleetplane.dev/last-checkpoint": "1795000000", "team.example/owner": "bob"})),
	"training pod with a short grace": testing.pod(testing.with_spec(testing.training, {"terminationGracePeriodSeconds": 90})),
	"training job with a short grace under a deadline": testing.job(testing.with_spec(testing.training, {"activeDeadlineSeconds": 3600, "terminationGracePeriodSeconds": 60}), {"backoffLimit": 1}),
}

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

test_fast_path_takes_the_common_workloads[name] if {
	some name, rev in common_cases
	fast(rev, {})
	clean(rev, {})
}

test_fast_path_answers_main_like_the_full_rules[name] if {
	some name, rev in common_cases
	answer := data.system.main with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	answer.response == {"uid": rev.request.uid, "allowed": true}
}

# Reviews the fast path must leave to the full rules: each is denied, warned
# about, or simply outside the common case.
training := testing.training

refused_cases := {
	"single-task volcano job (its queue is for the full rules)": testing.volcano([["worker", 2, training]]),
	"update": testing.as_update(testing.pod(training), {}),
	"subresource": object.union(testing.pod(training), {"request": {"subResource": "status"}}),
	"no uid": object.union(testing.pod(training), {"request": {"uid": ""}}),
	"wrong api version": object.union(testing.pod(training), {"apiVersion": "v1"}),
	"two volcano tasks": testing.volcano([["a", 1, training], ["b", 1, training]]),
	"init container": testing.pod(testing.with_spec(training, {"initContainers": [testing.container("init", {})]})),
	"mig slices": testing.pod(testing.with_limits(training, {"nvidia.com/mig-1g.10gb": "1"})),
	"fractional gpus": testing.pod(testing.with_limits(training, {"nvidia.com/gpu": "1.5"})),
	"request differs": testing.pod(testing.with_resources(training, {"limits": {"nvidia.com/gpu": "2"}, "requests": {"nvidia.com/gpu": "1"}})),
	"request without limit": testing.pod(testing.with_resources(training, {"requests": {"nvidia.com/gpu": "1"}})),
	"container without image": testing.pod(testing.with_spec(training, {"containers": [{"name": "main"}]})),
	"affinity": testing.pod(testing.with_spec(training, {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}}})),
	"affinity with an unknown model": testing.pod(by_models(training, [h100_value, "NVIDIA-X"])),
	"affinity with a model the team may not use": testing.pod_in(by_models(training, [h100_value, a100_value]), "analytics"),
	"affinity of no values": testing.pod(by_models(training, [])),
	"affinity of two terms": testing.pod(by_affinity(training, {}, [{"matchExpressions": [model_expression([h100_value])]}, {"matchExpressions": [model_expression([a100_value])]}])),
	"affinity of two expressions": testing.pod(by_affinity(training, {}, [{"matchExpressions": [model_expression([h100_value, a100_value]), {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}])),
	"affinity NotIn a model": testing.pod(by_affinity(training, {}, [{"matchExpressions": [object.union(model_expression([h100_value]), {"operator": "NotIn"})]}])),
	"affinity on another label": testing.pod(by_affinity(training, {}, [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}])),
	"affinity on the spot label": testing.pod(by_affinity(training, testing.h100, [{"matchExpressions": [{"key": "fleetplane.dev/capacity-type", "operator": "In", "values": ["spot"]}]}])),
	"affinity next to a model selector": testing.pod(by_affinity(training, testing.a100, [{"matchExpressions": [model_expression([h100_value])]}])),
	"affinity on the other family's label": testing.pod(by_affinity(training, {}, [{"matchExpressions": [{"key": "cloud.google.com/gke-tpu-accelerator", "operator": "In", "values": ["tpu-v5-lite-podslice"]}]}])),
	"cpu pod selecting gpu nodes by affinity": testing.pod(by_models(testing.cpu, [h100_value])),
	"cpu pod with an affinity": testing.pod(by_affinity(testing.cpu, {}, [{"matchExpressions": [{"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}]}])),
	"spot training by affinity without checkpoint": testing.pod(by_affinity(training, testing.spot_selector, [{"matchExpressions": [model_expression([h100_value, a100_value])]}])),
	"negative replicas": testing.deployment(training, -1),
	"zero deadline": testing.job(training, {"activeDeadlineSeconds": 0}),
	"labels not a map": testing.pod(object.union(training, {"metadata": {"labels": ["x"]}})),
	"tolerations not a list": testing.pod(testing.with_spec(training, {"tolerations": "all"})),
	"outside the teams": testing.pod_in(training, "default"),
	"no workload type": testing.pod(testing.with_labels(training, {"fleetplane.dev/workload-type": "unknown"})),
	"too many accelerators": testing.deployment(training, 9),
	"needs approval": testing.deployment(training, 4),
	"node name": testing.pod(testing.with_spec(training, {"nodeName": "gpu-0"})),
	"inference tolerating spot": testing.pod(testing.with_spec(testing.inference, {"tolerations": [{"operator": "Exists"}]})),
	"batch on demand": testing.pod(testing.replace_spec(testing.batch, "nodeSelector", testing.a100)),
	"another type's priority class": testing.pod(testing.with_spec(training, {"priorityClassName": "fleetplane-notebook"})),
	"spot training without checkpoint": testing.pod(testing.with_spec(training, {"nodeSelector": object.union(testing.h100, testing.spot_selector)})),
	"notebook without idle timeout": testing.pod(object.remove(testing.notebook, ["metadata"])),
	"no model selected": testing.pod(testing.without_spec_field(training, "nodeSelector")),
	"unknown model": testing.pod(testing.with_spec(training, {"nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-X"}})),
	"model not allowed": testing.pod_in(training, "analytics"),
	"image from docker hub": testing.pod(testing.with_spec(testing.cpu, {"containers": [{"name": "web", "image": "python:3"}]})),
	"privileged": testing.pod(testing.with_spec(testing.cpu, {"containers": [{"name": "web", "image": "nvcr.io/x:1", "securityContext": {"privileged": true}}]})),
	"host network": testing.pod(testing.with_spec(testing.cpu, {"hostNetwork": true})),
	"host path": testing.pod(testing.with_spec(testing.cpu, {"volumes": [{"name": "h", "hostPath": {"path": "/x"}}]})),
	"host path outside the teams (issue 19: judged now)": testing.pod_in(testing.with_spec(testing.cpu, {"volumes": [{"name": "h", "hostPath": {"path": "/x"}}]}), "default"),
	"system namespace": testing.pod_in(testing.cpu, "kube-system"),
	"training cronjob allowing overlaps": testing.cronjob(testing.training, {}),
	"capability added": testing.pod(testing.replace_spec(testing.cpu, "containers", [{"name": "web", "image": "nvcr.io/x", "securityContext": {"capabilities": {"add": ["SYS_ADMIN"]}}}])),
	"host port": testing.pod(testing.replace_spec(testing.cpu, "containers", [{"name": "web", "image": "nvcr.io/x", "ports": [{"containerPort": 80, "hostPort": 80}]}])),
	"seccomp unconfined": testing.pod(testing.with_spec(testing.cpu, {"securityContext": {"seccompProfile": {"type": "Unconfined"}}})),
	"sysctl": testing.pod(testing.with_spec(testing.cpu, {"securityContext": {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}})),
	"probe aimed at a host": testing.pod(testing.replace_spec(testing.cpu, "containers", [{"name": "web", "image": "nvcr.io/x", "livenessProbe": {"tcpSocket": {"host": "10.0.0.1", "port": 1}}}])),
	"apparmor annotation": testing.pod(testing.with_annotations(testing.cpu, {"container.apparmor.security.beta.kubernetes.io/web": "unconfined"})),
	"device variable": testing.pod(testing.replace_spec(testing.cpu, "containers", [{"name": "web", "image": "nvcr.io/x", "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}])),
	"gpu pod taking a configmap whole": testing.pod(testing.replace_spec(training, "containers", [object.union(testing.container("main", {"nvidia.com/gpu": "8"}), {"envFrom": [{"configMapRef": {"name": "s"}}]})])),
	"gpu pod reaching the rdma network": testing.pod(testing.replace_spec(training, "containers", [object.union(testing.container("main", {"nvidia.com/gpu": "8"}), {"env": [{"name": "NVIDIA_MOFED", "value": "enabled"}]})])),
	"gpu pod taking a configmap under a prefix that spells a feature variable": testing.pod(testing.replace_spec(training, "containers", [object.union(testing.container("main", {"nvidia.com/gpu": "8"}), {"envFrom": [{"configMapRef": {"name": "s"}, "prefix": "NVIDIA_G"}]})])),
	"gpu pod with a long grace": testing.pod(testing.with_spec(training, {"terminationGracePeriodSeconds": 3600})),
	"gpu pod with a grace that is no number": testing.pod(testing.with_spec(training, {"terminationGracePeriodSeconds": "60"})),
	"cpu pod tolerating the gpu taint": testing.pod(testing.with_spec(testing.cpu, {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]})),
	"cpu pod selecting gpu nodes": testing.pod(testing.with_spec(testing.cpu, {"nodeSelector": testing.h100})),
	"resource claims": testing.pod(testing.with_spec(testing.cpu, {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": "t"}]})),
	"cpu pod naming its node": testing.pod(testing.with_spec(testing.cpu, {"nodeName": "n1"})),
	"image volume": testing.pod(testing.with_spec(testing.cpu, {"volumes": [{"name": "m", "image": {"reference": "nvcr.io/m:1"}}]})),
	"exempt label": testing.pod(testing.with_labels(training, {"fleetplane.dev/exempt": "true"})),
	"platform annotation on the deployment": object.union(testing.deployment(testing.inference, 1), {"request": {"object": {"metadata": {"annotations": {"fleetplane.dev/reclaim-deadline": "1"}}}}}),
	"queue annotation": testing.pod(testing.with_annotations(testing.cpu, {"scheduling.volcano.sh/queue-name": "research"})),
	"accelerator daemonset": testing.of_kind("apps", "v1", "DaemonSet", {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "ds"}, "spec": {"template": training}}),
	"operator job with two kinds of replicas": testing.of_kind("kubeflow.org", "v1", "PyTorchJob", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "pt"}, "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1, "template": training}, "Worker": {"replicas": 2, "template": training}}}}),
	"job retried without bound": testing.job(testing.with_spec(training, {"activeDeadlineSeconds": 60}), {"podFailurePolicy": {"rules": [{"action": "Ignore"}]}}),
	"scale": testing.scale("apps", "statefulsets", "s", "uid-s", 1, 2),
	"podgroup": testing.podgroup({"queue": "research"}),
	"gpus and tpus": testing.pod(testing.with_spec(
		testing.with_limits(training, {"nvidia.com/gpu": "1", "google.com/tpu": "4"}),
		{"nodeSelector": object.union(testing.h100, testing.tpu)},
	)),
}

# Under both lines the fast path only answers when the warning line is at or
# under the limit; otherwise the full rules judge (and allow).
test_fast_path_leaves_inverted_budget_lines_to_the_full_rules if {
	rev := testing.pod(training)
	inverted := object.union(testing.config, {"budget": {"warn_ratio": 1.0, "deny_ratio": 0.8}})
	not admission.fast_allowed with input as rev
		with data.fleetplane.config as inverted
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	admission.allowed with input as rev
		with data.fleetplane.config as inverted
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

test_fast_path_leaves_the_rest_to_the_full_rules[name] if {
	some name, rev in refused_cases
	not fast(rev, {})
}

# Spend decides between the fast path and the full rules: under the warning
# line the fast path answers; at a warning, a denial, a malformed or unusual
# record, the full rules do.
spend_cases := {
	"stale month": [{"research": {"month": "2026-10", "usd": 1000000}}, true],
	"well under": [spent("research", 1000), true],
	"over the warning line": [spent("research", 39000), true],
	"over the budget": [spent("research", 60000), false],
	"malformed": [spent("research", "lots"), false],
	"not an object": [[1], false],
	"no usd for a stale month": [{"research": {"month": "2026-10"}}, false],
}

test_fast_path_and_spend[name] if {
	some name, [spend, want] in spend_cases
	rev := testing.pod(training)
	fast_answer := count({1 | fast(rev, spend)}) == 1
	fast_answer == want
}

test_fast_path_never_contradicts_the_full_rules if {
	every rev in object.union(object.union(common_cases, affinity_cases), refused_cases) {
		every spend in [{}, spent("research", 39000), spent("research", 60000)] {
			fast_implies_clean(rev, spend)
		}
	}
}

# The same contract under configurations and documents the fast path reads
# differently: a restricted type, pools reserved for teams, a type without a
# default runtime, a team exempt for a type, reservations.
contract_configs := {
	"restricted training": object.union(testing.config, {"workload_types": {"training": {"pod_security": "restricted"}}}),
	"reserved pools": object.union(testing.config, {"reserved_pools": {"h100-spot": ["serving"], "a100-on-demand": ["serving"]}}),
	"no default runtime": object.union(testing.config, {"workload_types": {"training": {"default_max_runtime_seconds": null}, "inference": {"default_max_runtime_seconds": null}}}),
	"research exempt for inference": object.union(testing.config, {"teams": {"research": {"budget_exempt_types": ["inference"]}}}),
	"a reservation whose teams are not a list": object.union(testing.config, {"reserved_pools": {"tpu-v5e": "research"}}),
	"no reservations document": json.remove(testing.config, ["reserved_pools"]),
	"unbounded inference, research exempt": unbounded_exempt,
}

# Inference has no default runtime, and team research is exempt from the
# budget for it: nothing bounds an inference pod in time, and it is allowed
# with the exemption warning (as the replay's serving team is).
unbounded_exempt := object.union(testing.config, {
	"workload_types": {"inference": {"default_max_runtime_seconds": null}},
	"teams": {"research": {"budget_exempt_types": ["inference"]}},
})

unbounded_exempt_cases := {
	"inference pod": testing.pod(testing.inference),
	"inference deployment by affinity": testing.deployment(by_models(testing.inference, [h100_value, a100_value]), 2),
}

test_fast_path_allows_an_unbounded_workload_of_an_exempt_team_like_the_full_rules[name] if {
	some name, rev in unbounded_exempt_cases
	every spend in [{}, spent("research", 39000), spent("research", 60000), {"research": {"month": "2026-10", "usd": 1000000}}] {
		unbounded_answer_agrees(rev, unbounded_exempt, spend)
	}
}

unbounded_answer_agrees(rev, config, spend) if {
	fast := admission.fast_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	fast.allowed == true
	[warning] := fast.warnings
	contains(warning, "nothing bounds how long the pods of")
	endswith(warning, "admitted because team research is exempt from the budget limit for inference workloads")
	fast == data.system.full_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
}

# Without the exemption the full rules deny it; with a malformed spend
# record (which they check even without an estimate) too.
test_fast_path_leaves_unbounded_workloads_to_the_full_rules[name] if {
	some name, [config, spend] in {
		"not exempt": [json.patch(unbounded_exempt, [{"op": "replace", "path": "/teams/research/budget_exempt_types", "value": []}]), {}],
		"malformed spend": [unbounded_exempt, spent("research", "lots")],
		"spend not a record": [unbounded_exempt, {"research": 5}],
	}
	rev := unbounded_exempt_cases["inference pod"]
	not admission.fast_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	full := data.system.full_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	full.allowed == false
	startswith(full.status.message, "budget: ")
}

contract_reservations := {"research": {"uid-a": {"usd": 30000, "expires_at": testing.now + 60}}}

test_fast_path_agrees_under_other_configurations[name] if {
	some name, config in contract_configs
	every rev in object.union(object.union(common_cases, affinity_cases), refused_cases) {
		same_response(rev, config, {})
	}
}

test_fast_path_agrees_with_reservations if {
	every rev in object.union(object.union(common_cases, affinity_cases), refused_cases) {
		same_response(rev, testing.config, contract_reservations)
	}
}

same_response(rev, config, reservations) if {
	not admission.fast_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.reservations as reservations
		with time.now_ns as testing.now_ns
}

same_response(rev, config, reservations) if {
	fast := admission.fast_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.reservations as reservations
		with time.now_ns as testing.now_ns
	fast == data.system.full_response with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with data.fleetplane.reservations as reservations
		with time.now_ns as testing.now_ns
}

test_fast_path_takes_reservations_into_account if {
	rev := testing.pod(training)
	warnings := admission.fast_warnings with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spent("research", 10000)
		with data.fleetplane.reservations as contract_reservations
		with time.now_ns as testing.now_ns
	count(warnings) == 1
	contains(warnings[0], "+ $30000 reserved for workloads admitted since")
}

test_fast_path_leaves_restricted_types_and_reserved_pools_to_the_full_rules[name] if {
	some name in ["restricted training", "reserved pools", "no default runtime"]
	not admission.fast_response with input as testing.pod(training)
		with data.fleetplane.config as contract_configs[name]
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

fast_implies_clean(rev, spend) if not fast(rev, spend)

fast_implies_clean(rev, spend) if agrees(rev, spend)

# Wherever the fast path answers, allowing or denying, it gives the full
# rules' very response.
test_fast_response_is_the_full_response if {
	every rev in object.union(object.union(object.union(common_cases, affinity_cases), refused_cases), fast_denials) {
		every spend in [{}, spent("research", 39000), spent("research", 60000)] {
			fast_response_agrees(rev, spend)
		}
	}
}

fast_response_agrees(rev, spend) if {
	not admission.fast_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
}

fast_response_agrees(rev, spend) if {
	fast := admission.fast_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	fast == data.system.full_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
}

test_fast_path_answers_a_budget_warning_like_the_full_rules if {
	rev := testing.pod(training)
	spend := spent("research", 39000)
	answer := data.system.main with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	warnings := with_spend(rev, spend, "warning_list")
	count(warnings) == 1
	startswith(warnings[0], "budget: team research would reach 83% of its monthly budget")
	answer.response == {"uid": rev.request.uid, "allowed": true, "warnings": warnings}
}

# Over the limit the fast path denies with the full rules' message (a fifth
# of the full-rule reviews of the benchmark's trace requests were these).
test_fast_path_denies_over_the_budget_like_the_full_rules if {
	rev := testing.pod(training)
	spend := spent("research", 60000)
	fast := admission.fast_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	fast.allowed == false
	startswith(fast.status.message, "budget: team research would reach ")
	contains(fast.status.message, "over the 100% limit")
	fast == data.system.full_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
}

test_fast_path_gives_the_exemption_warning if {
	rev := testing.deployment(testing.inference, 1)
	spend := spent("research", 60000)
	exempting := object.union(testing.config, {"teams": {"research": {"budget_exempt_types": ["inference"]}}})
	fast_warnings := admission.fast_warnings with input as rev
		with data.fleetplane.config as exempting
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	fast_warnings == admission.warning_list with input as rev
		with data.fleetplane.config as exempting
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as spend
		with time.now_ns as testing.now_ns
	contains(fast_warnings[0], "admitted because inference workloads are exempt")
}

# A registry entry without the trailing "/" is left to the full rules (which
# read it as a whole host and allow the training image).
test_fast_path_leaves_registries_without_a_slash_to_the_full_rules if {
	rev := testing.pod(training)
	hosts := object.union(testing.config, {"registries": ["nvcr.io", "registry.fleetplane.internal/"]})
	not admission.fast_allowed with input as rev
		with data.fleetplane.config as hosts
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	admission.allowed with input as rev
		with data.fleetplane.config as hosts
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

# A namespace the configuration maps to null is a team namespace for the full
# rules (`in_team_namespace` holds on any value but false), so their security
# rules apply there: the fast path must not skip them.
test_fast_path_applies_the_security_rules_in_a_namespace_mapped_to_null if {
	privileged := testing.replace_spec(testing.cpu, "containers", [{"name": "web", "image": "nvcr.io/x", "securityContext": {"privileged": true}}])
	rev := testing.pod_in(privileged, "odd")
	odd := object.union(testing.config, {"namespaces": {"odd": null}})
	not admission.fast_allowed with input as rev
		with data.fleetplane.config as odd
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	not admission.allowed with input as rev
		with data.fleetplane.config as odd
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

# A review that breaks only the priority-class or the idle-timeout rule is
# denied by the fast path with the full rules' response; one that breaks
# another rule too is left to them.
answers(rev, rule) := answer if {
	answer := data.system[rule] with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

idle_timeout_missing := testing.with_annotations(testing.notebook, {"fleetplane.dev/idle-timeout-seconds": "0"})

fast_denials := {
	"another type's priority class": refused_cases["another type's priority class"],
	"idle timeout of zero": testing.pod(idle_timeout_missing),
	"idle timeout too long": testing.statefulset(testing.with_annotations(testing.notebook, {"fleetplane.dev/idle-timeout-seconds": "999999"}), 1),
	"image from docker hub": refused_cases["image from docker hub"],
	"accelerator image from docker hub": testing.deployment(testing.replace_spec(testing.inference, "containers", [testing.container("main", {"nvidia.com/gpu": "1"}), {"name": "proxy", "image": "envoy:1"}]), 1),
	"no model selected": refused_cases["no model selected"],
	"another type's priority class, models by affinity": testing.pod(testing.with_spec(by_models(training, [h100_value, a100_value]), {"priorityClassName": "fleetplane-notebook"})),
}

# An image that only matches an allowed registry once qualified (docker.io
# for a single name) is allowed by the fast path, as by the full rules.
test_fast_path_allows_an_image_allowed_once_qualified if {
	rev := testing.pod(testing.with_spec(testing.cpu, {"containers": [{"name": "web", "image": "python:3"}]}))
	hub := object.union(testing.config, {"registries": array.concat(testing.config.registries, ["docker.io/library/"])})
	fast := admission.fast_response with input as rev
		with data.fleetplane.config as hub
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	fast == {"uid": rev.request.uid, "allowed": true}
	admission.allowed with input as rev
		with data.fleetplane.config as hub
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

test_fast_path_denies_like_the_full_rules[name] if {
	some name, rev in fast_denials
	fast := admission.fast_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	fast.allowed == false
	fast == answers(rev, "full_response")
	answers(rev, "main").response == fast
}

test_fast_path_gives_both_denials_like_the_full_rules if {
	rev := testing.pod(testing.with_spec(idle_timeout_missing, {"priorityClassName": "fleetplane-training"}))
	fast := admission.fast_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	count(split(fast.status.message, "\n")) == 2
	fast == answers(rev, "full_response")
}

test_fast_path_leaves_other_broken_rules_to_the_full_rules if {
	rev := testing.pod(testing.with_spec(training, {"priorityClassName": "fleetplane-notebook", "nodeName": "gpu-0"}))
	not admission.fast_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	answers(rev, "full_response").allowed == false
}

# A registry entry whose first part is no host ("team/" is docker.io/team/
# once qualified) is left to the full rules, which deny an image under it.
test_fast_path_leaves_registries_without_a_host_to_the_full_rules if {
	rev := testing.pod(testing.with_spec(testing.cpu, {"containers": [{"name": "web", "image": "team/web:1"}]}))
	odd := object.union(testing.config, {"registries": array.concat(testing.config.registries, ["team/"])})
	not admission.fast_response with input as rev
		with data.fleetplane.config as odd
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
	not admission.allowed with input as rev
		with data.fleetplane.config as odd
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
