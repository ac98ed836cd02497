# KubeRay: The pod templates of a RayCluster and a RayJob (ray.io/v1), judged
# whole. A RayCluster runs one head pod (spec.headGroupSpec.template) and, per
# worker group (spec.workerGroupSpecs[i]), numOfHosts pods (default 1) per
# replica. With spec.enableInTreeAutoscaling, Ray's autoscaler scales each
# group up to maxReplicas, so that bound is priced (and a group without it has
# none); without it, KubeRay runs replicas clamped to [minReplicas,
# maxReplicas], and a change is an update judged as any. The operator replaces
# the pods it runs, so pod deadlines do not bound them. A RayJob runs the
# cluster of spec.rayClusterSpec (none when it names an existing cluster with
# clusterSelector) once per attempt: 1 + spec.backoffLimit (default 0), each
# to spec.activeDeadlineSeconds; and, in K8sJobMode, a submitter Job of
# spec.submitterPodTemplate retried spec.submitterConfig.backoffLimit times
# (default 2). Without a submitterPodTemplate the operator builds a submitter
# without accelerators from the head's image: a batch Job the gate judges when
# the operator creates it.
package fleetplane.lib.workloads

templates(obj, "raycluster") := ray_cluster_templates("spec", as_object(object.get(obj, "spec", {})), 1, null)

templates(obj, "rayjob") := array.concat(cluster, submitter) if {
	spec := as_object(object.get(obj, "spec", {}))
	attempts := ray_job_attempts(spec)
	deadline := deadline_over(object.get(spec, "activeDeadlineSeconds", null), attempts)
	cluster := [t |
		is_object(spec.rayClusterSpec)
		some t in ray_cluster_templates("spec.rayClusterSpec", spec.rayClusterSpec, attempts, deadline)
	]
	submitter := [t |
		is_object(spec.submitterPodTemplate)
		retries := object.get(spec, ["submitterConfig", "backoffLimit"], 2)
		t := {
			"where": "spec.submitterPodTemplate",
			"template": spec.submitterPodTemplate,
			"replicas": 1,
			"deadline": deadline,
			"runs": runs_over(1, add_counts(1, retries), attempts),
			"replaced": false,
			"bounded": true,
			"bound": "",
		}
	]
}

# METADATA
# description: >-
#   The clusters a RayJob may create in all: 1 + backoffLimit; null when the
#   count is malformed.
ray_job_attempts(spec) := 1 + retries if {
	retries := object.get(spec, "backoffLimit", 0)
	is_whole(retries)
} else := null

ray_cluster_templates(prefix, spec, attempts, deadline) := array.concat(head, workers) if {
	autoscaling := object.get(spec, "enableInTreeAutoscaling", false) == true
	head := [{
		"where": sprintf("%s.headGroupSpec.template", [prefix]),
		"template": object.get(spec, ["headGroupSpec", "template"], null),
		"replicas": 1,
		"deadline": deadline,
		"runs": runs_over(1, 1, attempts),
		"replaced": true,
		"bounded": true,
		"bound": "",
	}]
	workers := [t |
		some i, entry in as_array(object.get(spec, "workerGroupSpecs", []))
		group := as_object(entry)
		where := sprintf("%s.workerGroupSpecs[%d].template", [prefix, i])
		[pods, bounded] := ray_group_pods(group, autoscaling)
		t := {
			"where": where,
			"template": object.get(group, "template", null),
			"replicas": pods,
			"deadline": deadline,
			"runs": runs_over(1, pods, attempts),
			"replaced": true,
			"bounded": bounded,
			"bound": sprintf(
				"spec.enableInTreeAutoscaling lets Ray's autoscaler grow %s without bound; set maxReplicas on its worker group",
				[where],
			),
		}
	]
}

# METADATA
# description: >-
#   [pods, bounded] of a worker group: its replicas as KubeRay runs them
#   (the autoscaler's maxReplicas with autoscaling, else replicas clamped to
#   [minReplicas, maxReplicas]) x numOfHosts; [0, false] when the autoscaler
#   has no maximum.
ray_group_pods(group, true) := [times(group.maxReplicas, hosts), true] if {
	hosts := object.get(group, "numOfHosts", 1)
} else := [0, false]

ray_group_pods(group, false) := [times(clamped, hosts), true] if {
	hosts := object.get(group, "numOfHosts", 1)
	clamped := ray_clamped(object.get(group, "replicas", 0), object.get(group, "minReplicas", 0), object.get(group, "maxReplicas", null))
}

ray_clamped(replicas, low, high) := min({max({replicas, low}), high}) if {
	is_whole(replicas)
	is_whole(low)
	is_whole(high)
} else := max({replicas, low}) if {
	is_whole(replicas)
	is_whole(low)
	high == null
} else := replicas if {
	not is_whole(replicas)
} else := low if {
	not is_whole(low)
} else := high
