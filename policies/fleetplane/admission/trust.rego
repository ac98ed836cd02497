# Trust rules: The labels and annotations the platform acts on
# (lib.platform_owned: exempt, preemptible, the controller's idle warning and
# reclaim deadline, its records, Volcano's PodGroup binding) are written by
# the platform alone. A request from anyone else may not set them on CREATE,
# nor change or remove them on UPDATE, on the object or on any of its pod
# templates (where they reach the pods). The platform is named in
# data.fleetplane.config.platform: the controller's service account, the
# controllers that copy judged templates into new objects (the Deployment,
# ReplicaSet, Job, CronJob and StatefulSet controllers, Volcano's), and the
# groups of platform admins.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib
import data.fleetplane.lib.workloads

# METADATA
# description: True when the request comes from the platform (see the file comment).
platform_requester if {
	requester != ""
	requester == config.platform.controller_service_account
}

platform_requester if {
	requester != ""
	requester in config.platform.workload_controllers
}

platform_requester if {
	some group in input.request.userInfo.groups
	group in config.platform.admin_groups
}

# The metadata of the object and of each of its pod templates, as
# [place, metadata] (workloads.metadata_places).
metadata_places(obj) := workloads.metadata_places(obj, kind_class, workloads.templates(obj, kind_class))

# METADATA
# description: >-
#   Platform-owned keys the request writes, as [place, "label" or
#   "annotation", key]: every one present on CREATE; every one whose value
#   differs from the old object's at the same place on UPDATE.
owned_writes contains [place, "label", key] if {
	input.request.operation == "CREATE"
	some [place, metadata] in current_metadata_places
	some key, _ in object.filter(workloads.as_object(object.get(metadata, "labels", {})), lib.platform_owned.labels)
}

owned_writes contains [place, "annotation", key] if {
	input.request.operation == "CREATE"
	some [place, metadata] in current_metadata_places
	some key, _ in object.filter(workloads.as_object(object.get(metadata, "annotations", {})), lib.platform_owned.annotations)
}

# The metadata places of the object under review, from the templates the
# rules derived already.
current_metadata_places := workloads.metadata_places(input.request.object, kind_class, templates)

owned_writes contains [place, kind, key] if {
	input.request.operation == "UPDATE"
	old := {place: metadata | some [place, metadata] in metadata_places(workloads.as_object(input.request.oldObject))}
	some [place, metadata] in current_metadata_places
	some [kind, field] in [["label", "labels"], ["annotation", "annotations"]]
	some key in lib.platform_owned[field]
	object.get(metadata, [field, key], null) != object.get(old, [place, field, key], null)
}

deny contains msg if {
	mode in {"full", "changes", "holding", "metadata"}
	judged_namespace
	some [place, kind, key] in owned_writes
	not platform_requester
	verb := {"CREATE": "sets", "UPDATE": "changes"}[input.request.operation]
	msg := sprintf(
		"platform-owned: %s %s %s %s, which only the platform writes (the controller acts on it); leave it as it was, or ask a platform admin",
		[place, verb, kind, key],
	)
}
