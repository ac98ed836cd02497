# Runtimes: Kinds whose pod templates another object instantiates through a
# trusted controller, in the user's namespace: Kubeflow Trainer's
# TrainingRuntime (a TrainJob's runtimeRef; Trainer copies its JobSet
# template) and Volcano's JobTemplate, JobFlow and CronJob (Volcano's
# controllers copy them into Volcano Jobs, which the gate judges whole when
# they are created). They hold nothing themselves, so the
# gate judges only who writes the platform's keys in them: a key written there
# would reach pods through a controller the gate trusts to copy. Their
# templates are found by shape.
package fleetplane.lib.workloads

templates(obj, "runtime") := discovered_templates(obj)

# METADATA
# description: >-
#   The metadata of an object and of each of its pod templates, as [place,
#   metadata]: where a platform-owned key written on the object would reach
#   its pods. A Pod is its own template; a TrainJob has its own places.
metadata_places(obj, "trainjob", _) := trainjob_metadata_places(obj)

metadata_places(obj, class, found) := array.concat(
	array.concat(
		[["metadata", as_object(object.get(obj, "metadata", {}))]],
		[[sprintf("%s.metadata", [t.where]), as_object(object.get(as_object(t.template), "metadata", {}))] |
			class != "pod"
			some t in found
		],
	),
	copied_metadata_places(obj, class),
) if class != "trainjob"
