package fleetplane.lib.workloads_test

import data.fleetplane.lib.workloads

gpu(name, n) := {"name": name, "image": "nvcr.io/x", "resources": {"limits": {"nvidia.com/gpu": n}}}

sidecar(name, n) := object.union(gpu(name, n), {"restartPolicy": "Always"})

# Effective demand with Kubernetes semantics: max(steady state, every init peak).
demand_cases := {
	"one container": {"spec": {"containers": [gpu("a", "2")]}, "want": {"nvidia.com/gpu": 2}},
	"app containers add up": {"spec": {"containers": [gpu("a", "2"), gpu("b", "3")]}, "want": {"nvidia.com/gpu": 5}},
	"larger init container wins": {"spec": {"initContainers": [gpu("i", "4")], "containers": [gpu("a", "1"), gpu("b", "1")]}, "want": {"nvidia.com/gpu": 4}},
	"smaller init container is hidden": {"spec": {"initContainers": [gpu("i", "1")], "containers": [gpu("a", "2")]}, "want": {"nvidia.com/gpu": 2}},
	"largest of several init containers": {"spec": {"initContainers": [gpu("i", "1"), gpu("j", "6")], "containers": [gpu("a", "2")]}, "want": {"nvidia.com/gpu": 6}},
	"sidecar runs with the app": {"spec": {"initContainers": [sidecar("s", "1")], "containers": [gpu("a", "2")]}, "want": {"nvidia.com/gpu": 3}},
	"sidecar before an init container adds to its peak": {
		"spec": {"initContainers": [sidecar("s", "2"), gpu("i", "4")], "containers": [gpu("a", "1")]},
		"want": {"nvidia.com/gpu": 6},
	},
	"sidecar after an init container does not": {
		"spec": {"initContainers": [gpu("i", "4"), sidecar("s", "2")], "containers": [gpu("a", "1")]},
		"want": {"nvidia.com/gpu": 4},
	},
	"resources are counted apart": {
		"spec": {"containers": [{"name": "a", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1", "nvidia.com/mig-1g.10gb": 2, "google.com/tpu": "4", "cpu": "8"}}}]},
		"want": {"nvidia.com/gpu": 1, "nvidia.com/mig-1g.10gb": 2, "google.com/tpu": 4},
	},
	"request-only accelerators hold nothing": {
		"spec": {"containers": [{"name": "a", "image": "x", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
		"want": {"nvidia.com/gpu": 0},
	},
	"no accelerators": {"spec": {"containers": [{"name": "a", "image": "x"}]}, "want": {}},
}

test_pod_demand[name] if {
	some name, tc in demand_cases
	workloads.pod_demand(tc.spec) == tc.want
}

test_pod_accelerators_sums_resources if {
	workloads.devices(workloads.pod_demand(demand_cases["resources are counted apart"].spec)) == 7
}

count_cases := {
	"digits": ["12", 12],
	"zero": ["0", 0],
	"integer": [3, 3],
	"integral float": [2.0, 2],
}

test_parse_count[name] if {
	some name, [q, want] in count_cases
	workloads.parse_count(q) == want
}

test_parse_count_rejects[q] if {
	some q in ["1.5", "-1", "1e3", "0x2", "abc", "01", "+1", " 1", "1 ", "1Ki", ""]
	not workloads.parse_count(q)
}

test_parse_count_rejects_numbers[name] if {
	some name, q in {"fraction": 1.5, "negative": -2}
	not workloads.parse_count(q)
}

concurrency_cases := {
	"default": [{}, 1],
	"parallelism": [{"parallelism": 4}, 4],
	"completions bound": [{"parallelism": 4, "completions": 2}, 2],
	"completions above": [{"parallelism": 2, "completions": 10}, 2],
	"completions alone": [{"completions": 10}, 1],
	"malformed passes through": [{"parallelism": "4", "completions": 2}, "4"],
}

test_job_concurrency[name] if {
	some name, [spec, want] in concurrency_cases
	workloads.job_concurrency(spec) == want
}

test_kind_class if {
	workloads.kind_class({"group": "", "version": "v1", "kind": "Pod"}) == "pod"
	workloads.kind_class({"group": "batch.volcano.sh", "version": "v1alpha1", "kind": "Job"}) == "volcano"
	workloads.kind_class({"group": "batch", "version": "v1", "kind": "Job"}) == "job"
	workloads.kind_class({"group": "apps", "version": "v1", "kind": "DaemonSet"}) == "daemonset"
	workloads.kind_class({"group": "", "version": "v1", "kind": "ReplicationController"}) == "replicated"
	not workloads.kind_class({"group": "kubeflow.org", "version": "v1", "kind": "PyTorchJob"})
}

pod_spec := {"containers": [gpu("a", "1")]}

shape_cases := {
	"pod without spec": {"object": {"metadata": {}}, "class": "pod", "want": {"pod.spec is missing"}},
	"pod without containers": {"object": {"spec": {"containers": []}}, "class": "pod", "want": {"pod.spec.containers must be a non-empty list"}},
	"deployment without template": {"object": {"spec": {}}, "class": "replicated", "want": {"spec.template is missing"}},
	"negative replicas": {"object": {"spec": {"replicas": -1, "template": {"spec": pod_spec}}}, "class": "replicated", "want": {"spec.template: replicas -1 must be a non-negative integer"}},
	"string replicas": {"object": {"spec": {"replicas": "2", "template": {"spec": pod_spec}}}, "class": "replicated", "want": {`spec.template: replicas "2" must be a non-negative integer`}},
	"job deadline": {
		"object": {"spec": {"activeDeadlineSeconds": 0, "template": {"spec": pod_spec}}}, "class": "job",
		"want": {"spec.template: activeDeadlineSeconds 0 must be a positive integer"},
	},
	"pod deadline": {
		"object": {"spec": {"jobTemplate": {"spec": {"template": {"spec": object.union(pod_spec, {"activeDeadlineSeconds": "1h"})}}}}}, "class": "cronjob",
		"want": {`spec.jobTemplate.spec.template: activeDeadlineSeconds "1h" must be a positive integer`},
	},
	"volcano without tasks": {"object": {"spec": {}}, "class": "volcano", "want": {"spec.tasks must be a non-empty list of tasks"}},
	"volcano task without template": {"object": {"spec": {"tasks": [{"name": "a", "replicas": 1}]}}, "class": "volcano", "want": {"spec.tasks[0].template is missing"}},
	"lists that are not lists": {
		"object": {"spec": object.union(pod_spec, {"initContainers": {}, "tolerations": "all", "volumes": 1})}, "class": "pod",
		"want": {"pod.spec.initContainers must be a list", "pod.spec.tolerations must be a list", "pod.spec.volumes must be a list"},
	},
	"labels that are not a map": {
		"object": {"metadata": {"labels": ["a"], "annotations": "x"}, "spec": pod_spec}, "class": "pod",
		"want": {"pod.metadata.labels must be a map of strings", "pod.metadata.annotations must be a map of strings"},
	},
	"container problems": {
		"object": {"spec": {"containers": ["x", {"image": "nvcr.io/x"}, {"name": "b", "resources": {"limits": "1"}}]}}, "class": "pod",
		"want": {
			"pod containers[0]: must be an object",
			"pod containers[1]: name must be a non-empty string",
			`pod containers "b": image must be a non-empty string`,
			`pod containers "b": resources.limits must be a map`,
		},
	},
	"well-formed": {"object": {"spec": pod_spec}, "class": "pod", "want": set()},
}

test_shape_problems[name] if {
	some name, tc in shape_cases
	workloads.shape_problems(tc.object, tc.class) == tc.want
}

test_as_array_and_as_object if {
	workloads.as_array("x") == []
	workloads.as_array([1]) == [1]
	workloads.as_object(null) == {}
}

template_ok_cases := {
	"well formed": [{"metadata": {"labels": {"a": "b"}}, "spec": pod_spec}, true],
	"tolerations not a list": [{"spec": object.union(pod_spec, {"tolerations": "all"})}, false],
	"labels not a map": [{"metadata": {"labels": ["a"]}, "spec": pod_spec}, false],
	"container without image": [{"spec": {"containers": [{"name": "a"}]}}, false],
	"no spec": [{"metadata": {}}, false],
}

test_template_ok[name] if {
	some name, [template, want] in template_ok_cases
	t := {"where": "pod", "template": template, "replicas": 1, "deadline": null}
	workloads.template_ok(t, workloads.containers(object.get(template, "spec", {}))) == want
}

# ------------------------------------------------------------- holdings

job_runs_cases := {
	"defaults: one completion and six retries": [{}, 7],
	"completions and backoffLimit": [{"completions": 8, "parallelism": 2, "backoffLimit": 2}, 10],
	"work queue: parallel pods and retries": [{"parallelism": 4, "backoffLimit": 0}, 4],
	"indexed with a limit per index": [{"completionMode": "Indexed", "completions": 4, "backoffLimitPerIndex": 1}, 8],
	"indexed without a limit per index": [{"completionMode": "Indexed", "completions": 4, "backoffLimit": 1}, 5],
	"failures ignored: no bound": [{"podFailurePolicy": {"rules": [{"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget"}]}]}}, null],
	"failures counted": [{"podFailurePolicy": {"rules": [{"action": "FailJob"}]}, "backoffLimit": 1}, 2],
	"malformed count: no bound": [{"completions": "8"}, null],
}

test_job_runs[name] if {
	some name, [spec, want] in job_runs_cases
	workloads.job_runs(spec) == want
}

# [replicas, runs, deadline, replaced, pod deadline, default runtime, want]
pod_seconds_cases := {
	"a pod runs to its deadline": [1, 1, null, false, 600, 86400, 600],
	"a pod without a deadline runs the default": [1, 1, null, false, null, 86400, 86400],
	"replicas are replaced: their deadline bounds nothing": [3, 3, null, true, 600, 86400, 259200],
	"job runs every retry": [2, 10, null, false, 3600, 86400, 36000],
	"job deadline bounds the wall clock": [2, 10, 1800, false, 3600, 86400, 3600],
	"job deadline bounds runs without a bound": [2, null, 1800, false, null, null, 3600],
}

test_pod_seconds[name] if {
	some name, [replicas, runs, deadline, replaced, pod_deadline, fallback, want] in pod_seconds_cases
	workloads.pod_seconds(replicas, runs, deadline, replaced, pod_deadline, fallback) == want
}

test_pod_seconds_undefined_without_a_bound[name] if {
	some name, args in {
		"no default, no deadline": [1, 1, null, false, null, null],
		"replaced without a default": [2, 2, null, true, 600, null],
		"unbounded runs without a job deadline": [1, null, null, false, 600, 86400],
	}
	not workloads.pod_seconds(args[0], args[1], args[2], args[3], args[4], args[5])
}

test_daemonset_template_is_unbounded if {
	[t] := workloads.templates({"spec": {"template": {"spec": pod_spec}}}, "daemonset")
	t.bounded == false
	t.replicas == 0
	contains(t.bound, "one pod on every node")
}

pytorch_job := {"spec": {"pytorchReplicaSpecs": {
	"Master": {"replicas": 1, "template": {"spec": pod_spec}},
	"Worker": {"replicas": 3, "template": {"spec": pod_spec}},
}}}

jobset := {"spec": {"replicatedJobs": [{"name": "w", "replicas": 2, "template": {"spec": {"parallelism": 4, "completions": 4, "template": {"spec": pod_spec}}}}]}}

ray_cluster := {"spec": {
	"headGroupSpec": {"template": {"spec": pod_spec}},
	"workerGroupSpecs": [{"replicas": 1, "minReplicas": 1, "maxReplicas": 5, "template": {"spec": pod_spec}}],
}}

discovery_cases := {
	"kubeflow replica specs": [pytorch_job, {"spec.pytorchReplicaSpecs.Master.template": [1, true], "spec.pytorchReplicaSpecs.Worker.template": [3, true]}],
	"jobset: replicas x parallelism": [jobset, {"spec.replicatedJobs[0].template.spec.template": [8, true]}],
	"ray: maxReplicas wins, a head without a count is unbounded": [ray_cluster, {"spec.workerGroupSpecs[0].template": [5, true], "spec.headGroupSpec.template": [0, false]}],
	"a template at spec.template without replicas": [{"spec": {"template": {"spec": pod_spec}}}, {"spec.template": [0, false]}],
	"spec.replicas counts for spec.template": [{"spec": {"replicas": 2, "template": {"spec": pod_spec}}}, {"spec.template": [2, true]}],
	"no template": [{"spec": {"queue": "q"}}, {}],
}

test_discovered_templates[name] if {
	some name, [obj, want] in discovery_cases
	{t.where: [t.replicas, t.bounded] | some t in workloads.discovered_templates(obj)} == want
}

test_workload_class if {
	workloads.workload_class({"group": "apps", "kind": "Deployment"}, {}) == "replicated"
	workloads.workload_class({"group": "kubeflow.org", "kind": "PyTorchJob"}, pytorch_job) == "generic"
	not workloads.workload_class({"group": "", "kind": "ConfigMap"}, {"data": {"a": "b"}})
	count(workloads.templates(pytorch_job, "generic")) == 2
}

test_unbounded_generic_template_says_what_to_set if {
	[t] := workloads.discovered_templates({"spec": {"template": {"spec": pod_spec}}})
	contains(t.bound, "set replicas (or maxReplicas)")
}
