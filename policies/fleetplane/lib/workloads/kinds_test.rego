package fleetplane.lib.workloads_test

import data.fleetplane.lib.workloads

pod_template(n) := {"metadata": {}, "spec": {"containers": [{"name": "main", "image": "nvcr.io/x", "resources": {"limits": {"nvidia.com/gpu": n}}}]}}

# [where, replicas, runs, deadline, bounded] of every template of an object.
shape(obj, class) := [[t.where, t.replicas, t.runs, t.deadline, t.bounded] | some t in workloads.templates(obj, class)]

js(spec) := {"spec": spec}

replicated(name, replicas, job_spec) := {"name": name, "replicas": replicas, "template": {"spec": object.union(job_spec, {"template": pod_template("8")})}}

test_jobset_counts_every_replicated_job_and_its_restarts if {
	obj := js({
		"failurePolicy": {"maxRestarts": 3},
		"replicatedJobs": [
			replicated("workers", 4, {"parallelism": 2, "completions": 2, "backoffLimit": 0, "activeDeadlineSeconds": 3600}),
			replicated("driver", 1, {}),
		],
	})

	# 4 Jobs x 2 pods at once; each Job runs 2 pods once, 4 attempts.
	shape(obj, "jobset") == [
		["spec.replicatedJobs[0].template.spec.template", 8, 32, 14400, true],
		["spec.replicatedJobs[1].template.spec.template", 1, 28, null, true],
	]
}

test_jobset_without_failure_policy_runs_once if {
	shape(js({"replicatedJobs": [replicated("w", 2, {"backoffLimit": 0})]}), "jobset") == [["spec.replicatedJobs[0].template.spec.template", 2, 2, null, true]]
}

test_jobset_restarts_without_count_have_no_bound if {
	obj := js({
		"failurePolicy": {"maxRestarts": 1, "rules": [{"action": "RestartJobSetAndIgnoreMaxRestarts"}]},
		"replicatedJobs": [replicated("w", 2, {"backoffLimit": 0})],
	})
	[[_, 2, null, null, true]] = shape(obj, "jobset")
}

test_jobset_malformed_replicas_are_named if {
	some msg in workloads.shape_problems(js({"replicatedJobs": [replicated("w", "2", {})]}), "jobset")
	contains(msg, "replicas \"2\" must be a non-negative integer")
}

test_jobset_without_replicated_jobs_is_malformed if {
	"spec.replicatedJobs must be a non-empty list of replicated jobs" in workloads.shape_problems(js({}), "jobset")
}

lws_obj(spec) := {"spec": spec}

test_lws_counts_leader_and_workers_of_every_group if {
	obj := lws_obj({"replicas": 3, "leaderWorkerTemplate": {"size": 4, "leaderTemplate": pod_template("0"), "workerTemplate": pod_template("8")}})
	shape(obj, "leaderworkerset") == [
		["spec.leaderWorkerTemplate.leaderTemplate", 3, 3, null, true],
		["spec.leaderWorkerTemplate.workerTemplate", 9, 9, null, true],
	]
}

test_lws_without_leader_template_runs_size_pods_of_the_worker if {
	obj := lws_obj({"replicas": 2, "leaderWorkerTemplate": {"size": 4, "workerTemplate": pod_template("8")}})
	shape(obj, "leaderworkerset") == [["spec.leaderWorkerTemplate.workerTemplate", 8, 8, null, true]]
}

test_lws_counts_the_surge_of_a_rollout if {
	surged(1) == 12
	surged("50%") == 12
	surged("30%") == 12
	surged(0) == 8
}

surged(surge) := n if {
	obj := lws_obj({
		"replicas": 2,
		"rolloutStrategy": {"type": "RollingUpdate", "rollingUpdateConfiguration": {"maxSurge": surge}},
		"leaderWorkerTemplate": {"size": 4, "workerTemplate": pod_template("8")},
	})
	[t] := workloads.templates(obj, "leaderworkerset")
	n := t.replicas
}

ray_head := {"template": pod_template("0")}

ray_group(fields) := object.union({"groupName": "g", "template": pod_template("1")}, fields)

test_raycluster_prices_the_autoscaling_bound if {
	obj := {"spec": {"enableInTreeAutoscaling": true, "headGroupSpec": ray_head, "workerGroupSpecs": [ray_group({"replicas": 1, "minReplicas": 0, "maxReplicas": 6, "numOfHosts": 2})]}}
	shape(obj, "raycluster") == [
		["spec.headGroupSpec.template", 1, 1, null, true],
		["spec.workerGroupSpecs[0].template", 12, 12, null, true],
	]
}

test_raycluster_autoscaling_without_maximum_is_unbounded if {
	obj := {"spec": {"enableInTreeAutoscaling": true, "headGroupSpec": ray_head, "workerGroupSpecs": [ray_group({"replicas": 1})]}}
	[_, [_, 0, 0, null, false]] = shape(obj, "raycluster")
}

test_raycluster_without_autoscaling_runs_replicas_clamped if {
	counts := [n |
		some fields in [{"replicas": 3}, {"replicas": 3, "maxReplicas": 2}, {"replicas": 1, "minReplicas": 4, "maxReplicas": 9}]
		[_, t] := workloads.templates({"spec": {"headGroupSpec": ray_head, "workerGroupSpecs": [ray_group(fields)]}}, "raycluster")
		n := t.replicas
	]
	counts == [3, 2, 4]
}

test_rayjob_runs_its_cluster_once_per_attempt if {
	obj := {"spec": {
		"backoffLimit": 2,
		"activeDeadlineSeconds": 600,
		"rayClusterSpec": {"headGroupSpec": ray_head, "workerGroupSpecs": [ray_group({"replicas": 2})]},
		"submitterPodTemplate": pod_template("0"),
	}}
	shape(obj, "rayjob") == [
		["spec.rayClusterSpec.headGroupSpec.template", 1, 3, 1800, true],
		["spec.rayClusterSpec.workerGroupSpecs[0].template", 2, 6, 1800, true],
		["spec.submitterPodTemplate", 1, 9, 1800, true],
	]
}

test_rayjob_on_an_existing_cluster_has_no_templates if {
	workloads.templates({"spec": {"clusterSelector": {"ray.io/cluster": "shared"}}}, "rayjob") == []
}

trainjob(trainer) := {"metadata": {"labels": {"fleetplane.dev/workload-type": "training"}}, "spec": {
	"runtimeRef": {"name": "torch-distributed"},
	"labels": {"team-tag": "x"},
	"trainer": trainer,
	"podTemplateOverrides": [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": {"nvidia.com/gpu.product": "H100"}, "serviceAccountName": "ignored"}}],
}}

test_trainjob_is_its_nodes if {
	[t] := workloads.templates(trainjob({"image": "nvcr.io/x", "numNodes": 4, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}}), "trainjob")
	[t.where, t.replicas, t.runs, t.bounded] == ["spec.trainer", 4, 4, true]
	t.template.metadata.labels == {"fleetplane.dev/workload-type": "training", "team-tag": "x"}
	t.template.spec.nodeSelector == {"nvidia.com/gpu.product": "H100"}
	not t.template.spec.serviceAccountName
	workloads.pod_demand(t.template.spec) == {"nvidia.com/gpu": 8}
}

test_trainjob_on_a_platform_runtime_takes_its_priority_class if {
	job := json.patch(trainjob({"image": "nvcr.io/x", "numNodes": 1}), [{"op": "replace", "path": "/spec/runtimeRef", "value": {"name": "torch-distributed.fleetplane-training"}}])
	[t] := workloads.templates(job, "trainjob")
	t.template.spec.priorityClassName == "fleetplane-training"
}

test_trainjob_on_another_runtime_names_no_priority_class if {
	[t] := workloads.templates(trainjob({"image": "nvcr.io/x", "numNodes": 1}), "trainjob")
	not t.template.spec.priorityClassName
	namespaced := json.patch(trainjob({"image": "nvcr.io/x", "numNodes": 1}), [{"op": "replace", "path": "/spec/runtimeRef", "value": {"kind": "TrainingRuntime", "name": "mine.fleetplane-training-high"}}])
	[n] := workloads.templates(namespaced, "trainjob")
	not n.template.spec.priorityClassName
}

test_trainjob_without_nodes_is_unbounded if {
	[t] := workloads.templates(trainjob({"image": "nvcr.io/x", "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}}), "trainjob")
	t.bounded == false
	contains(t.bound, "set spec.trainer.numNodes")
}

test_trainjob_without_image_says_why if {
	some msg in workloads.shape_problems(trainjob({"numNodes": 1}), "trainjob")
	startswith(msg, "spec.trainer.image is missing: the gate cannot see the image of the runtime's template")
}

test_trainjob_metadata_places if {
	places := {place | some [place, _] in workloads.metadata_places(trainjob({"numNodes": 1}), "trainjob", [])}
	places == {"metadata", "spec", "spec.podTemplateOverrides[0].metadata"}
}

test_runtime_templates_are_found_by_shape if {
	runtime := {"spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": pod_template("1")}}}]}}}}
	[[where, _, _, _, _]] := shape(runtime, "runtime")
	where == "spec.template.spec.replicatedJobs[0].template.spec.template"
}

test_kind_table if {
	classes := {[g, k]: workloads.kind_class({"group": g, "kind": k}) |
		some [g, k] in [
			["jobset.x-k8s.io", "JobSet"], ["leaderworkerset.x-k8s.io", "LeaderWorkerSet"],
			["ray.io", "RayCluster"], ["ray.io", "RayJob"], ["trainer.kubeflow.org", "TrainJob"],
			["trainer.kubeflow.org", "TrainingRuntime"], ["flow.volcano.sh", "JobTemplate"], ["batch.volcano.sh", "CronJob"],
		]
	}
	classes == {
		["jobset.x-k8s.io", "JobSet"]: "jobset", ["leaderworkerset.x-k8s.io", "LeaderWorkerSet"]: "leaderworkerset",
		["ray.io", "RayCluster"]: "raycluster", ["ray.io", "RayJob"]: "rayjob", ["trainer.kubeflow.org", "TrainJob"]: "trainjob",
		["trainer.kubeflow.org", "TrainingRuntime"]: "runtime", ["flow.volcano.sh", "JobTemplate"]: "runtime", ["batch.volcano.sh", "CronJob"]: "runtime",
	}
}

test_lws_malformed_counts_are_kept_for_template_problems if {
	surged("a lot") == "a lot"
	obj := lws_obj({"replicas": "two", "leaderWorkerTemplate": {"size": 4, "workerTemplate": pod_template("8")}})
	[t] := workloads.templates(obj, "leaderworkerset")
	not is_number(t.replicas)
}

test_lws_a_surge_over_malformed_replicas_keeps_the_replicas if {
	obj := lws_obj({
		"replicas": "two",
		"rolloutStrategy": {"rollingUpdateConfiguration": {"maxSurge": 1}},
		"leaderWorkerTemplate": {"size": 4, "workerTemplate": pod_template("8")},
	})
	[t] := workloads.templates(obj, "leaderworkerset")
	not is_number(t.replicas)
}

test_lws_a_size_below_one_is_named if {
	obj := lws_obj({"replicas": 1, "leaderWorkerTemplate": {"size": 0, "leaderTemplate": pod_template("8"), "workerTemplate": pod_template("8")}})
	some t in workloads.templates(obj, "leaderworkerset")
	t.where == "spec.leaderWorkerTemplate.workerTemplate"
	contains(sprintf("%v", [t.replicas]), "size 0 (at least 1)")
}
