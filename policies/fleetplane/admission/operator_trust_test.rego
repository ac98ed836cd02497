package fleetplane.admission_test

import data.fleetplane.testing

# A platform-owned key on the user's object of an operator's kind is refused
# wherever its operator would copy it onto what it creates (issue 30 item 3):
# the operator is trusted to copy what the gate judged, so the key is refused
# where the user writes it, not where the operator copies it.

jobset_with(job_metadata, pod_metadata) := testing.of_kind("jobset.x-k8s.io", "v1alpha2", "JobSet", {
	"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": {"name": "js"},
	"spec": {"replicatedJobs": [{"name": "workers", "replicas": 1, "template": {
		"metadata": job_metadata,
		"spec": {
			"parallelism": 1, "completions": 1, "backoffLimit": 0,
			"template": object.union(testing.training, {"metadata": pod_metadata}),
		},
	}}]},
})

lws_with(metadata, leader_metadata) := testing.of_kind("leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", {
	"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": object.union({"name": "lws"}, metadata),
	"spec": {"replicas": 1, "leaderWorkerTemplate": {
		"size": 2,
		"leaderTemplate": object.union(testing.training, {"metadata": leader_metadata}),
		"workerTemplate": testing.training,
	}},
})

rayjob_with(metadata, submitter_metadata) := testing.of_kind("ray.io", "v1", "RayJob", {
	"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": object.union({"name": "rj"}, metadata),
	"spec": {
		"entrypoint": "python train.py",
		"shutdownAfterJobFinishes": true,
		"rayClusterSpec": {
			"headGroupSpec": {"template": ray_head},
			"workerGroupSpecs": [{"groupName": "gpu", "replicas": 1, "minReplicas": 1, "maxReplicas": 1, "template": testing.training}],
		},
		"submitterPodTemplate": object.union(submitter, {"metadata": object.union(submitter.metadata, submitter_metadata)}),
	},
})

exempt_labels := {"labels": exempt}

submitter := object.union(testing.with_labels(testing.cpu, {testing.type_label: "training"}), {"spec": {"priorityClassName": "fleetplane-training"}})

record := {"annotations": {"fleetplane.dev/reclaimed-at": "1795000000"}}

operator_trust_cases := {
	"a JobSet's Job template labelled exempt (JobSet copies it onto the Job)": [jobset_with(exempt_labels, testing.training.metadata), {"platform-owned"}],
	"a JobSet's pod template labelled exempt": [jobset_with({}, object.union(testing.training.metadata, exempt_labels)), {"platform-owned"}],
	"a JobSet without the platform's keys": [jobset_with({"labels": {"team.example/run": "7"}}, testing.training.metadata), set()],
	"a LeaderWorkerSet labelled exempt": [lws_with(exempt_labels, testing.training.metadata), {"platform-owned"}],
	"a LeaderWorkerSet's leader template with a reclaim record": [lws_with({}, object.union(testing.training.metadata, record)), {"platform-owned"}],
	"a RayJob labelled exempt (KubeRay copies its labels onto the RayCluster)": [rayjob_with(exempt_labels, {}), {"platform-owned"}],
	"a RayJob's submitter template labelled exempt": [rayjob_with({}, exempt_labels), {"platform-owned"}],
	"a RayJob without the platform's keys": [rayjob_with({}, {}), set()],
	"a platform admin's RayJob labelled exempt": [testing.by(rayjob_with(exempt_labels, {}), "carol@example.com", ["fleetplane-admins"]), set()],
	"a TrainingRuntime's Job template labelled exempt": [runtime_with_job_metadata(exempt_labels), {"platform-owned"}],
	"a TrainingRuntime's Job template without the platform's keys": [runtime_with_job_metadata({"labels": {"team.example/run": "7"}}), set()],
	"JobSet's controller copies a Job template labelled exempt": [operator(object.union(testing.job(testing.training, {"parallelism": 1, "completions": 1, "backoffLimit": 0}), {"request": {"object": {"metadata": {"labels": exempt}}}}), "system:serviceaccount:jobset-system:jobset-controller-manager"), set()],
	"a user's Job labelled exempt": [object.union(testing.job(testing.training, {"parallelism": 1, "completions": 1, "backoffLimit": 0}), {"request": {"object": {"metadata": {"labels": exempt}}}}), {"platform-owned"}],
}

runtime_with_job_metadata(job_metadata) := testing.of_kind("trainer.kubeflow.org", "v1alpha1", "TrainingRuntime", {
	"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainingRuntime", "metadata": {"name": "rt"},
	"spec": {"template": {"spec": {"replicatedJobs": [{"name": "node", "template": {
		"metadata": job_metadata,
		"spec": {"template": testing.training},
	}}]}}},
})

test_operator_trust_message_names_the_job_template if {
	some_message(
		operator_trust_cases["a JobSet's Job template labelled exempt (JobSet copies it onto the Job)"][0],
		"platform-owned: spec.replicatedJobs[0].template.metadata sets label fleetplane.dev/exempt",
	)
}

test_operator_trust[name] if {
	some name, [rev, want] in operator_trust_cases
	rules(rev) == want
}
