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

test_fast_path_leaves_the_rest_to_the_full_rules[name] if {
	some name, rev in refused_cases
	not fast(rev, {})
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

test_fast_path_agrees_under_other_configurations[name] if {
	some name, config in contract_configs
	every rev in object.union(object.union(common_cases, affinity_cases), refused_cases) {
		same_response(rev, config, {})
	}
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
