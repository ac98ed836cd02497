package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# The operators' kinds judged whole (issue 30 item 3), and what their
# controllers are trusted with (issue 33).

jobset_review(replicas, parallelism, tmpl) := testing.of_kind("jobset.x-k8s.io", "v1alpha2", "JobSet", {
	"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
	"spec": {"replicatedJobs": [{"name": "workers", "replicas": replicas, "template": {"spec": {
		"parallelism": parallelism, "completions": parallelism, "backoffLimit": 0,
		"template": tmpl,
	}}}]},
})

raycluster_review(max_replicas, worker) := testing.of_kind("ray.io", "v1", "RayCluster", {
	"apiVersion": "ray.io/v1", "kind": "RayCluster", "metadata": {"name": "rc"},
	"spec": {
		"enableInTreeAutoscaling": true,
		"headGroupSpec": {"template": ray_head},
		"workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "minReplicas": 0, "maxReplicas": max_replicas, "template": worker}],
	},
})

lws_review(groups, size) := testing.of_kind("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", {
	"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "lws"},
	"spec": {"replicas": groups, "leaderWorkerTemplate": {"size": size, "workerTemplate": testing.training}},
})

trainjob_review(nodes, fields) := testing.of_kind("trainer.kubeflow.org", "v1alpha1", "TrainJob", {
	"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
	"metadata": {"name": "tj", "labels": {testing.type_label: "training"}, "annotations": {testing.queue_key: "research"}},
	"spec": object.union(
		{
			"runtimeRef": {"name": "torch-distributed"},
			"trainer": {"image": testing.gpu_image, "numNodes": nodes, "resourcesPerNode": {"limits": {"nvidia.com/gpu": "8"}}},
			"podTemplateOverrides": [{"targetJobs": [{"name": "node"}], "spec": {"nodeSelector": testing.h100, "priorityClassName": "fleetplane-training"}}],
		},
		fields,
	),
})

runtime_review(tmpl) := testing.of_kind("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", {
	"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": "rt"},
	"spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": tmpl}}}]}}},
})

# A Ray head without accelerators, of the cluster's workload type.
ray_head := object.union(testing.with_labels(testing.cpu, {testing.type_label: "training"}), {"spec": {"priorityClassName": "fleetplane-training"}})

operator(rev, sa) := testing.by(rev, sa, ["system:serviceaccounts"])

trainer_sa := "system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager"

kuberay_sa := "system:serviceaccount:ray-system:kuberay-operator"

exempt := {"fleetplane.dev/exempt": "true"}

owned_by(rev, owner) := object.union(rev, {"request": {"object": {"metadata": {"ownerReferences": [owner]}}}})

job_owner := {"apiVersion": "batch/v1", "kind": "Job", "name": "someone-elses", "uid": "6b1c1f0e-0000-4000-8000-000000000001", "controller": true}

kinds_cases := {
	# Whole: every replicated job, group and worker counts.
	"a JobSet within limits": [jobset_review(2, 1, testing.training), set()],
	"a JobSet over max-accelerators as a whole": [jobset_review(5, 2, testing.training), {"max-accelerators", "approval"}],
	"a RayCluster within its autoscaling bound": [raycluster_review(3, testing.training), set()],
	"a RayCluster whose autoscaling bound is over the maximum": [raycluster_review(9, testing.training), {"max-accelerators", "approval"}],
	"a LeaderWorkerSet of 1 group of 2": [lws_review(1, 2), set()],
	"a LeaderWorkerSet of 3 groups of 4": [lws_review(3, 4), {"max-accelerators", "approval"}],
	"a TrainJob of 2 nodes": [trainjob_review(2, {}), set()],
	"a TrainJob of 9 nodes": [trainjob_review(9, {}), {"max-accelerators", "approval"}],
	"a TrainJob without numNodes": [json.remove(trainjob_review(2, {}), ["request/object/spec/trainer/numNodes"]), {"unbounded-holding"}],
	# Trust: the object the user wrote is judged.
	"a platform-owned label in a RayCluster's worker template": [raycluster_review(2, testing.with_labels(testing.training, exempt)), {"platform-owned"}],
	"a platform-owned label in a TrainJob's spec.labels": [trainjob_review(2, {"labels": exempt}), {"platform-owned"}],
	"a platform-owned label in a pod template override": [trainjob_review(2, {"podTemplateOverrides": array.concat(trainjob_review(2, {}).request.object.spec.podTemplateOverrides, [{"targetJobs": [{"name": "initializer"}], "metadata": {"labels": exempt}}])}), {"platform-owned"}],
	"a platform-owned label in a TrainingRuntime's template": [runtime_review(testing.with_labels(testing.training, exempt)), {"platform-owned"}],
	"a TrainingRuntime holds nothing itself": [runtime_review(testing.with_limits(testing.training, {"nvidia.com/gpu": "80"})), set()],
	"a platform admin's TrainingRuntime with the label": [testing.by(runtime_review(testing.with_labels(testing.training, exempt)), "carol@example.com", ["fleetplane-admins"]), set()],
	"Trainer creates a PodGroup in the team's queue": [operator(testing.podgroup({"queue": "research", "priorityClassName": "fleetplane-training"}), trainer_sa), set()],
	"KubeRay creates a PodGroup in another team's queue": [operator(testing.podgroup({"queue": "serving"}), kuberay_sa), {"queue"}],
	# Owner references: only the platform writes them.
	"a user's pod names another workload's Job as its owner": [owned_by(testing.pod(testing.training), job_owner), {"owner-reference"}],
	"a user's Deployment names an owner": [owned_by(testing.deployment(testing.cpu, 1), job_owner), {"owner-reference"}],
	"the Job controller's pod names its Job": [testing.by(owned_by(testing.pod(testing.training), job_owner), "system:serviceaccount:kube-system:job-controller", []), set()],
	"KubeRay's pod names its RayCluster": [operator(owned_by(testing.pod(testing.training), {"apiVersion": "ray.io/v1", "kind": "RayCluster", "name": "rc", "uid": "u", "controller": true}), kuberay_sa), set()],
}

test_kinds[name] if {
	some name, [rev, want] in kinds_cases
	rules(rev) == want
}

test_kinds_admitted_when_nothing_is_refused if {
	admitted := {name | some name, [rev, want] in kinds_cases; want == set(); allowed(rev)}
	admitted == {name | some name, [_, want] in kinds_cases; want == set()}
}

test_whole_jobset_message_counts_every_pod if {
	some_message(jobset_review(5, 2, testing.training), "max-accelerators: the workload holds 80 accelerators at once")
}

test_owner_reference_message_says_what_to_change if {
	some_message(owned_by(testing.pod(testing.training), job_owner), "owner-reference: metadata.ownerReferences[0] names Job \"someone-elses\" as the owner")
	some_message(owned_by(testing.pod(testing.training), job_owner), "remove it (group your objects with labels)")
}

test_owner_reference_kept_on_update_is_not_written if {
	rev := owned_by(testing.deployment(testing.cpu, 2), job_owner)
	update := object.union(rev, {"request": {"operation": "UPDATE", "oldObject": object.union(rev.request.object, {"spec": {"replicas": 1}})}})
	not "owner-reference" in rules(update)
}

test_trainjob_without_image_is_refused_with_the_reason if {
	rev := json.remove(trainjob_review(2, {}), ["request/object/spec/trainer/image"])
	some_message(rev, "malformed-request: spec.trainer.image is missing: the gate cannot see the image of the runtime's template")
}

test_jobset_restarting_without_count_says_what_to_use if {
	rev := object.union(jobset_review(2, 1, testing.training), {"request": {"object": {"spec": {"failurePolicy": {"rules": [{"action": "RestartJobSetAndIgnoreMaxRestarts"}]}}}}})
	some_message(rev, "(a JobSet failure policy rule with action RestartJobSetAndIgnoreMaxRestarts), so its cost has no bound; use the action RestartJobSet")
}

ray_labelled(labels) := object.union(raycluster_review(2, testing.training), {"request": {"object": {"metadata": {"labels": labels}}}})

ray_label_cases := {
	"the team's queue": [{"volcano.sh/queue-name": "research"}, set()],
	"another team's queue": [{"volcano.sh/queue-name": "serving"}, {"queue"}],
	"a workload type's priority class": [{"ray.io/priority-class-name": "fleetplane-training"}, set()],
	"a priority class of no workload type": [{"ray.io/priority-class-name": "system-node-critical"}, {"priority-class"}],
}

test_ray_labels_kuberay_copies_into_its_podgroup[name] if {
	some name, [labels, want] in ray_label_cases
	rules(ray_labelled(labels)) == want
}

test_ray_queue_label_message_says_what_to_set if {
	some_message(ray_labelled({"volcano.sh/queue-name": "serving"}), "queue: label volcano.sh/queue-name is \"serving\", and KubeRay puts the cluster's PodGroup in the queue it names; set it to \"research\"")
}

test_a_head_only_raycluster_takes_the_full_rules if {
	rev := object.union(
		json.remove(raycluster_review(2, testing.training), ["request/object/spec/workerGroupSpecs"]),
		{"request": {"object": {"metadata": {"labels": {"volcano.sh/queue-name": "serving"}}}}},
	)
	rules(rev) == {"queue"}
	not admission.fast_response with input as rev
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}
