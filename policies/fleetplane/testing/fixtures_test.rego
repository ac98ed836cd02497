# METADATA
# title: Test fixtures
# description: >-
#   Shared fixtures for the policy unit tests: the configuration document
#   (config_test.rego, generated from policyreview/corpus/config.json), a
#   fixed clock, and builders for pods, workloads and AdmissionReviews.
package fleetplane.testing

# `config`, the configuration every policy test runs against, is generated from
# policyreview/corpus/config.json into config_test.rego.

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
