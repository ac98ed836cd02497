# METADATA
# title: Test fixtures
# description: >-
#   Shared fixtures for the policy unit tests: the same configuration document
#   as policyreview/corpus/config.json (a pytest checks that both agree), a
#   fixed clock, and builders for pods, workloads and AdmissionReviews.
package fleetplane.testing

# METADATA
# description: The configuration every policy test runs against.
config := {
	"namespaces": {
		"ml-research": "research",
		"ml-serving": "serving",
		"analytics": "analytics",
	},
	"teams": {
		"research": {
			"namespaces": [
				"ml-research",
			],
			"queue": "research",
			"monthly_budget_usd": 50000,
			"allowed_models": [
				"h100-80gb",
				"a100-40gb",
				"tpu-v5e",
			],
			"default_model": "a100-40gb",
			"guaranteed": {
				"nvidia.com/gpu": 16,
				"google.com/tpu": 0,
			},
			"quota": {
				"nvidia.com/gpu": 64,
				"google.com/tpu": 16,
			},
			"budget_exempt_types": [],
		},
		"serving": {
			"namespaces": [
				"ml-serving",
			],
			"queue": "serving",
			"monthly_budget_usd": 30000,
			"allowed_models": [
				"h100-80gb",
				"a100-40gb",
			],
			"default_model": "h100-80gb",
			"guaranteed": {
				"nvidia.com/gpu": 8,
				"google.com/tpu": 0,
			},
			"quota": {
				"nvidia.com/gpu": 32,
				"google.com/tpu": 0,
			},
			"budget_exempt_types": [],
		},
		"analytics": {
			"namespaces": [
				"analytics",
			],
			"queue": "analytics",
			"monthly_budget_usd": 5000,
			"allowed_models": [
				"a100-40gb",
			],
			"default_model": "a100-40gb",
			"guaranteed": {
				"nvidia.com/gpu": 2,
				"google.com/tpu": 0,
			},
			"quota": {
				"nvidia.com/gpu": 8,
				"google.com/tpu": 0,
			},
			"budget_exempt_types": [
				"notebook",
			],
		},
	},
	"models": {
		"h100-80gb": {
			"resource": "nvidia.com/gpu",
			"node_label": "nvidia.com/gpu.product",
			"label_value": "NVIDIA-H100-80GB-HBM3",
			"price_per_hour_usd": {
				"on-demand": 12.29,
				"spot": 3.93,
			},
		},
		"a100-40gb": {
			"resource": "nvidia.com/gpu",
			"node_label": "nvidia.com/gpu.product",
			"label_value": "NVIDIA-A100-SXM4-40GB",
			"price_per_hour_usd": {
				"on-demand": 3.67,
				"spot": 1.1,
			},
		},
		"tpu-v5e": {
			"resource": "google.com/tpu",
			"node_label": "cloud.google.com/gke-tpu-accelerator",
			"label_value": "tpu-v5-lite-podslice",
			"price_per_hour_usd": {
				"on-demand": 1.2,
				"spot": 0.48,
			},
		},
	},
	"workload_types": {
		"training": {
			"max_accelerators": 64,
			"capacity": "any",
			"priority_classes": [
				"fleetplane-training",
				"fleetplane-training-high",
			],
			"default_max_runtime_seconds": 86400,
			"checkpoint_required_on_spot": true,
			"budget_exempt": false,
			"preemptible": true,
			"min_runtime_seconds": 600,
			"pod_security": "baseline",
			"max_idle_timeout_seconds": null,
			"idle": {
				"util_threshold_percent": 5,
				"window_seconds": 3600,
				"grace_seconds": 1800,
			},
		},
		"inference": {
			"max_accelerators": 16,
			"capacity": "on-demand",
			"priority_classes": [
				"fleetplane-inference",
			],
			"default_max_runtime_seconds": 2592000,
			"checkpoint_required_on_spot": false,
			"budget_exempt": true,
			"preemptible": false,
			"min_runtime_seconds": 0,
			"pod_security": "baseline",
			"max_idle_timeout_seconds": null,
			"idle": null,
		},
		"notebook": {
			"max_accelerators": 1,
			"capacity": "any",
			"priority_classes": [
				"fleetplane-notebook",
			],
			"default_max_runtime_seconds": 28800,
			"checkpoint_required_on_spot": false,
			"budget_exempt": false,
			"preemptible": true,
			"min_runtime_seconds": 0,
			"pod_security": "baseline",
			"max_idle_timeout_seconds": 14400,
			"idle": {
				"util_threshold_percent": 5,
				"window_seconds": 1800,
				"grace_seconds": 900,
			},
		},
		"batch": {
			"max_accelerators": 32,
			"capacity": "spot",
			"priority_classes": [
				"fleetplane-batch",
			],
			"default_max_runtime_seconds": 21600,
			"checkpoint_required_on_spot": false,
			"budget_exempt": false,
			"preemptible": true,
			"min_runtime_seconds": 300,
			"pod_security": "baseline",
			"max_idle_timeout_seconds": null,
			"idle": {
				"util_threshold_percent": 5,
				"window_seconds": 3600,
				"grace_seconds": 1800,
			},
		},
	},
	"approval": {
		"threshold_accelerators": 32,
		"approved_ids": [
			"APR-2026-001",
		],
	},
	"registries": [
		"nvcr.io/",
		"registry.fleetplane.internal/",
	],
	"budget": {
		"warn_ratio": 0.8,
		"deny_ratio": 1.0,
	},
	"pools": {
		"h100-spot": {
			"model": "h100-80gb",
			"capacity_type": "spot",
			"max_unavailable": "10%",
			"driver_version": "570.124.06",
			"teams": [],
		},
		"a100-on-demand": {
			"model": "a100-40gb",
			"capacity_type": "on-demand",
			"max_unavailable": 2,
			"driver_version": "570.124.06",
			"teams": [],
		},
		"tpu-v5e": {
			"model": "tpu-v5e",
			"capacity_type": "on-demand",
			"max_unavailable": "25%",
			"driver_version": "",
			"teams": [],
		},
	},
	"reserved_pools": {},
	"health": {"max_unavailable": "10%"},
	"lifetime": {
		"stop_grace_seconds": 1800, "checkpoint_window_seconds": 3600, "checkpoint_slack_seconds": 300,
		"orphan_grace_seconds": 300, "straggler_window_seconds": 1800, "straggler_util_percent": 5,
		"busy_util_percent": 50,
	},
	"system_namespaces": [
		"kube-system",
		"kube-public",
		"kube-node-lease",
		"fleetplane-system",
		"gpu-operator",
		"volcano-system",
	],
	"platform": {
		"controller_service_account": "system:serviceaccount:fleetplane-system:fleetplane-controller",
		"workload_controllers": [
			"system:serviceaccount:kube-system:replicaset-controller",
			"system:serviceaccount:kube-system:deployment-controller",
			"system:serviceaccount:kube-system:job-controller",
			"system:serviceaccount:kube-system:cronjob-controller",
			"system:serviceaccount:kube-system:statefulset-controller",
			"system:serviceaccount:kube-system:daemon-set-controller",
			"system:serviceaccount:kube-system:replication-controller",
			"system:kube-controller-manager",
			"system:serviceaccount:volcano-system:volcano-controllers",
		],
		"admin_groups": [
			"fleetplane-admins",
		],
	},
	"upgrade": {
		"maintenance_windows": [
			{
				"days": [
					"sat",
					"sun",
				],
				"start": "00:00",
				"end": "23:59",
			},
			{
				"days": [
					"wed",
				],
				"start": "22:00",
				"end": "04:00",
			},
		],
	},
}

# 2026-11-18T11:06:40Z, a Wednesday.
now_ns := 1795000000000000000

now := 1795000000

# METADATA
# description: >-
#   The approvals the platform admins granted (data.fleetplane.approvals):
#   APR-2026-001 lets team research hold up to 64 accelerators for 30 more
#   days, in any one workload until the controller binds it.
approvals := {"APR-2026-001": {"team": "research", "max_accelerators": 64, "expires_at": now + 2592000, "uid": null}}

controller := "system:serviceaccount:fleetplane-system:fleetplane-controller"

month := "2026-11"

# --------------------------------------------------------------- builders

gpu_image := "nvcr.io/nvidia/pytorch:24.05-py3"

type_label := "fleetplane.dev/workload-type"

queue_key := "scheduling.volcano.sh/queue-name"

h100 := {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}

a100 := {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"}

tpu := {"cloud.google.com/gke-tpu-accelerator": "tpu-v5-lite-podslice"}

spot_selector := {"fleetplane.dev/capacity-type": "spot"}

spot_toleration := {"key": "fleetplane.dev/capacity-type", "operator": "Equal", "value": "spot", "effect": "NoSchedule"}

# METADATA
# description: A container holding the given limits.
container(name, limits) := {"name": name, "image": gpu_image, "resources": {"limits": limits}}

# METADATA
# description: >-
#   A pod template of a workload type with one container holding limits, naming
#   the Volcano queue of team research, whose namespace ml-research reviews are
#   made in unless a test says otherwise (queue.rego).
template(workload_type, priority_class, selector, limits) := {
	"metadata": {"labels": {type_label: workload_type}, "annotations": {queue_key: "research"}},
	"spec": {
		"priorityClassName": priority_class,
		"nodeSelector": selector,
		"containers": [container("main", limits)],
	},
}

# Valid templates, one per workload type.
training := template("training", "fleetplane-training", h100, {"nvidia.com/gpu": "8"})

inference := template("inference", "fleetplane-inference", h100, {"nvidia.com/gpu": "1"})

notebook := object.union(
	template("notebook", "fleetplane-notebook", a100, {"nvidia.com/gpu": "1"}),
	{"metadata": {"annotations": {"fleetplane.dev/idle-timeout-seconds": "3600"}}},
)

batch := object.union(
	template("batch", "fleetplane-batch", object.union(a100, spot_selector), {"nvidia.com/gpu": "2"}),
	{"spec": {"tolerations": [spot_toleration]}},
)

cpu := {"metadata": {}, "spec": {"containers": [{"name": "web", "image": "registry.fleetplane.internal/web:1"}]}}

# METADATA
# description: A template with its spec patched (objects merge, lists are replaced).
with_spec(tmpl, patch) := object.union(tmpl, {"spec": patch})

with_labels(tmpl, labels) := object.union(tmpl, {"metadata": {"labels": labels}})

with_annotations(tmpl, annotations) := object.union(tmpl, {"metadata": {"annotations": annotations}})

with_limits(tmpl, limits) := with_spec(tmpl, {"containers": [container("main", limits)]})

with_resources(tmpl, resources) := with_spec(tmpl, {"containers": [{"name": "main", "image": gpu_image, "resources": resources}]})

without_spec_field(tmpl, field) := json.remove(tmpl, [concat("/", ["spec", field])])

# METADATA
# description: A template with one spec field replaced (not merged).
replace_spec(tmpl, field, value) := object.union(without_spec_field(tmpl, field), {"spec": {field: value}})

# METADATA
# description: An AdmissionReview CREATE request for an object.
review(gvk, namespace, obj) := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"request": {
		"uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
		"kind": gvk,
		"operation": "CREATE",
		"namespace": namespace,
		"userInfo": {"username": "alice@example.com"},
		"object": obj,
	},
}

pod_gvk := {"group": "", "version": "v1", "kind": "Pod"}

pod(tmpl) := pod_in(tmpl, "ml-research")

pod_in(tmpl, namespace) := review(pod_gvk, namespace, object.union(
	{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": namespace}},
	queued_in(tmpl, namespace),
))

# An accelerator template naming the fixtures' queue ("research", as
# `template` writes it) names the queue of the namespace's team instead, or
# none outside team namespaces (queue.rego); any other template, and a queue
# a test wrote itself, is left as it is.
queued_in(tmpl, namespace) := object.union(tmpl, {"metadata": {"annotations": {queue_key: queue}}}) if {
	default_queued(tmpl)
	queue := config.teams[config.namespaces[namespace]].queue
} else := json.remove(tmpl, ["metadata/annotations/scheduling.volcano.sh~1queue-name"]) if {
	default_queued(tmpl)
} else := tmpl

default_queued(tmpl) if {
	tmpl.metadata.annotations[queue_key] == "research"
	some c in tmpl.spec.containers
	count(object.get(c, ["resources", "limits"], {})) > 0
}

deployment(tmpl, replicas) := review(
	{"group": "apps", "version": "v1", "kind": "Deployment"},
	"ml-research",
	{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}, "spec": {"replicas": replicas, "template": tmpl}},
)

statefulset(tmpl, replicas) := review(
	{"group": "apps", "version": "v1", "kind": "StatefulSet"},
	"ml-research",
	{"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "s"}, "spec": {"replicas": replicas, "template": tmpl}},
)

job(tmpl, job_spec) := review(
	{"group": "batch", "version": "v1", "kind": "Job"},
	"ml-research",
	{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"}, "spec": object.union(job_spec, {"template": tmpl})},
)

cronjob(tmpl, job_spec) := review(
	{"group": "batch", "version": "v1", "kind": "CronJob"},
	"ml-research",
	{
		"apiVersion": "batch/v1", "kind": "CronJob", "metadata": {"name": "c"},
		"spec": {"schedule": "0 * * * *", "jobTemplate": {"spec": object.union(job_spec, {"template": tmpl})}},
	},
)

# METADATA
# description: A CronJob whose runs never overlap (concurrencyPolicy Forbid).
cronjob_forbid(tmpl, job_spec) := object.union(cronjob(tmpl, job_spec), {"request": {"object": {"spec": {"concurrencyPolicy": "Forbid"}}}})

# METADATA
# description: >-
#   A Volcano Job from [name, replicas, template] triples, in the research
#   team's queue.
volcano(tasks) := volcano_in_queue(tasks, {"queue": "research"})

# METADATA
# description: A Volcano Job with these spec fields besides its tasks ({} for no queue).
volcano_in_queue(tasks, fields) := review(
	{"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"},
	"ml-research",
	{
		"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "v"},
		"spec": object.union(fields, {"schedulerName": "volcano", "tasks": [{"name": name, "replicas": replicas, "template": tmpl} |
			some [name, replicas, tmpl] in tasks
		]}),
	},
)

in_namespace(rev, namespace) := object.union(rev, {"request": {"namespace": namespace}})

# METADATA
# description: The review as made by a user (username and groups).
by(rev, username, groups) := object.union(rev, {"request": {"userInfo": {"username": username, "groups": groups}}})

# METADATA
# description: A review of any kind, CREATE in ml-research.
of_kind(group, version, kind, obj) := review({"group": group, "version": version, "kind": kind}, "ml-research", obj)

# METADATA
# description: >-
#   An UPDATE of the scale subresource of a workload of resource in group,
#   from old to new replicas; the Scale carries the parent's uid.
scale(group, resource, name, uid, old, new) := {
	"apiVersion": "admission.k8s.io/v1",
	"kind": "AdmissionReview",
	"request": {
		"uid": "6f4c1c2e-1a8e-4f55-9a34-5b2b1f0c0001",
		"kind": {"group": "autoscaling", "version": "v1", "kind": "Scale"},
		"resource": {"group": group, "version": "v1", "resource": resource},
		"subResource": "scale",
		"name": name,
		"namespace": "ml-research",
		"operation": "UPDATE",
		"userInfo": {"username": "alice@example.com"},
		"object": {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name, "namespace": "ml-research", "uid": uid}, "spec": {"replicas": new}},
		"oldObject": {"apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {"name": name, "namespace": "ml-research", "uid": uid}, "spec": {"replicas": old}},
	},
}

# METADATA
# description: A HorizontalPodAutoscaler of a target {apiVersion, kind, name} up to max replicas.
autoscaler(target, max) := of_kind("autoscaling", "v2", "HorizontalPodAutoscaler", {
	"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": {"name": "h"},
	"spec": {"scaleTargetRef": target, "minReplicas": 1, "maxReplicas": max},
})

# METADATA
# description: A Volcano PodGroup with these spec fields.
podgroup(spec) := of_kind("scheduling.volcano.sh", "v1beta1", "PodGroup", {
	"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": {"name": "pg"},
	"spec": object.union({"minMember": 1}, spec),
})

# METADATA
# description: >-
#   The records the controller keeps of scalable workloads
#   (data.fleetplane.workloads): a training StatefulSet "s" of 8 GPUs a
#   replica, a CPU ReplicaSet "web".
workload_records := {"ml-research": {
	"statefulsets.apps/s": {"uid": "uid-s", "kind": "StatefulSet", "workload_type": "training", "devices_per_replica": 8, "approval_id": null},
	"replicasets.apps/web": {"uid": "uid-web", "kind": "ReplicaSet", "workload_type": null, "devices_per_replica": 0, "approval_id": null},
	"deployments.apps/d": {"uid": "uid-d", "kind": "Deployment", "workload_type": "inference", "devices_per_replica": 1, "approval_id": null},
	"rollouts.argoproj.io/r": {"uid": "uid-r", "kind": "Rollout", "workload_type": "training", "devices_per_replica": 8, "approval_id": "APR-2026-001"},
}}

as_update(rev, old) := object.union(rev, {"request": {"operation": "UPDATE", "oldObject": old}})
