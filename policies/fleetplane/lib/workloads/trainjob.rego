# Kubeflow Trainer TrainJob: What the gate can see of a TrainJob
# (trainer.kubeflow.org/v1alpha1): the trainer's nodes, spec.trainer.numNodes
# pods of spec.trainer.image with spec.trainer.resourcesPerNode and
# spec.trainer.env, labelled and annotated with the TrainJob's own metadata,
# spec.labels and spec.annotations (which Trainer copies into the JobSet and
# Jobs it makes) and placed by the podTemplateOverrides (podSpecOverrides in
# early releases) that target the trainer's job "node". What it cannot see:
# the runtime spec.runtimeRef names (a ClusterTrainingRuntime or
# TrainingRuntime, another object), which holds the JobSet template, its other
# jobs (initializers), the default numNodes and image, and the failure policy.
# So the TrainJob is judged on the trainer's nodes, run once for the type's
# default runtime (a lower bound of its cost), and numNodes and image must be
# written on it when it asks for accelerators; the JobSet Trainer makes from
# it and the runtime is a JobSet the gate judges whole when Trainer creates
# it, with the runtime's jobs, restarts and images.
package fleetplane.lib.workloads

trainer_job := "node"

templates(obj, "trainjob") := [{
	"where": "spec.trainer",
	"template": {
		"metadata": {
			"labels": object.union(trainjob_map(obj, ["metadata", "labels"]), object.union(trainjob_map(obj, ["spec", "labels"]), override.labels)),
			"annotations": object.union(trainjob_map(obj, ["metadata", "annotations"]), object.union(trainjob_map(obj, ["spec", "annotations"]), override.annotations)),
		},
		"spec": object.union(object.union(runtime_placement(as_object(object.get(obj, "spec", {}))), override.spec), {"containers": [object.union(
			{"name": "trainer", "resources": as_object(object.get(trainer, "resourcesPerNode", {}))},
			object.filter(trainer, {"image", "env", "envFrom"}),
		)]}),
	},
	"replicas": nodes,
	"deadline": null,
	"runs": nodes,
	"replaced": false,
	"bounded": count([n | n := trainer.numNodes; is_whole(n)]) == 1,
	"bound": "the number of its nodes is the runtime's, which the gate cannot see; set spec.trainer.numNodes",
}] if {
	trainer := as_object(object.get(obj, ["spec", "trainer"], {}))
	nodes := object.get(trainer, "numNodes", 0)
	override := trainjob_override(as_object(object.get(obj, "spec", {})))
}

trainjob_map(obj, path) := as_object(object.get(obj, path, {}))

# METADATA
# description: >-
#   The priority class of a TrainJob's pods, as the platform's runtime names it.
#   Trainer v2.1.0 gives a TrainJob no field for one (its pod template overrides
#   have no priorityClassName): its pods take the runtime's. The platform's
#   ClusterTrainingRuntimes (cluster-scoped: teams cannot write them) are named
#   `<runtime>.<priority class>` and put that class in their templates, so the
#   TrainJob is judged in it; the JobSet the Trainer makes from the runtime is
#   judged again with the class it really carries. Any other runtime names none.
runtime_placement(spec) := {"priorityClassName": class} if {
	ref := as_object(object.get(spec, "runtimeRef", {}))
	object.get(ref, "kind", "ClusterTrainingRuntime") == "ClusterTrainingRuntime"
	name := object.get(ref, "name", "")
	is_string(name)
	parts := split(name, ".")
	count(parts) > 1
	class := parts[count(parts) - 1]
	class != ""
} else := {}

# METADATA
# description: >-
#   The metadata and the placement fields of the pod template overrides that
#   target the trainer's job: {labels, annotations, spec}, later overrides
#   winning.
trainjob_override(spec) := {
	"labels": object.union_n([as_object(object.get(o, ["metadata", "labels"], {})) | some o in overrides]),
	"annotations": object.union_n([as_object(object.get(o, ["metadata", "annotations"], {})) | some o in overrides]),
	"spec": object.union_n([object.filter(as_object(object.get(o, "spec", {})), placement_fields) | some o in overrides]),
} if {
	overrides := [o |
		some entry in array.concat(as_array(object.get(spec, "podTemplateOverrides", [])), as_array(object.get(spec, "podSpecOverrides", [])))
		o := as_object(entry)
		some target in as_array(object.get(o, "targetJobs", []))
		object.get(as_object(target), "name", "") == trainer_job
	]
}

placement_fields := {"nodeSelector", "affinity", "tolerations", "priorityClassName", "schedulerName"}

# METADATA
# description: >-
#   The places of a TrainJob where the platform's keys would reach its pods:
#   its metadata, spec.labels and spec.annotations, and every pod template
#   override's metadata, as [place, metadata].
trainjob_metadata_places(obj) := array.concat(
	[
		["metadata", as_object(object.get(obj, "metadata", {}))],
		["spec", {"labels": trainjob_map(obj, ["spec", "labels"]), "annotations": trainjob_map(obj, ["spec", "annotations"])}],
	],
	[[sprintf("spec.%s[%d].metadata", [field, i]), as_object(object.get(as_object(o), "metadata", {}))] |
		some field in ["podTemplateOverrides", "podSpecOverrides"]
		some i, o in as_array(object.get(obj, ["spec", field], []))
	],
)
