# Security rules: Rules for every pod in a team namespace, with or without
# accelerators: images from allowed registries only, no privileged containers,
# no host namespaces, no hostPath volumes.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   Containers the security rules look at: every container on CREATE and on
#   UPDATE of a workload; on UPDATE of a Pod only the containers whose image
#   is new (an image change, an ephemeral container), so a running pod is never
#   refused for what it was admitted with.
checked_containers contains [f.where, entry] if {
	mode == "full"
	in_team_namespace
	some f in facts
	some entry in f.entries
}

checked_containers contains [f.where, entry] if {
	mode == "images"
	in_team_namespace
	some f in facts
	some entry in f.entries
	not previous_image(entry)
}

previous_image(entry) if entry.container.image in previous_images

previous_images := {c.image |
	spec := workloads.as_object(object.get(workloads.as_object(input.request.oldObject), "spec", {}))
	some list in ["containers", "initContainers", "ephemeralContainers"]
	some c in workloads.as_array(object.get(spec, list, []))
}

deny contains msg if {
	some [where, entry] in checked_containers
	image := entry.container.image
	is_string(image)
	not allowed_image(image)
	msg := image_registry_message(workloads.container_where(where, entry), image)
}

# METADATA
# description: The image-registry denial (the fast path gives the same).
image_registry_message(container, image) := sprintf(
	"image-registry: %s uses image %q from a registry that is not allowed; use an image from: %s",
	[container, image, concat(", ", config.registries)],
)

deny contains msg if {
	some [where, entry] in checked_containers
	entry.container.securityContext.privileged == true
	msg := sprintf(
		"privileged: %s runs privileged; remove securityContext.privileged (the GPU device plugin already exposes the devices)",
		[workloads.container_where(where, entry)],
	)
}

deny contains msg if {
	mode == "full"
	in_team_namespace
	some f in facts

	# The list inline: as a rule it would cost OPA a rule evaluation per review.
	some field in ["hostNetwork", "hostPID", "hostIPC"]
	f.spec[field] == true
	msg := sprintf("host-namespaces: %s sets spec.%s; remove it, team workloads may not share the node's namespaces", [f.where, field])
}

deny contains msg if {
	mode == "full"
	in_team_namespace
	some f in facts
	some volume in f.spec.volumes
	volume.hostPath
	msg := sprintf(
		"host-path: %s mounts hostPath volume %q; use a persistentVolumeClaim, emptyDir or CSI volume instead",
		[f.where, object.get(volume, "name", "")],
	)
}

# METADATA
# description: An image is allowed when its fully qualified name starts with an allowed registry prefix.
allowed_image(image) if {
	some registry in config.registries
	startswith(qualified_image(image), registry_prefix(registry))
}

# A registry entry always ends with "/", so "nvcr.io" never admits "nvcr.io.example.com".
registry_prefix(registry) := registry if {
	endswith(registry, "/")
} else := concat("", [registry, "/"])

# METADATA
# description: >-
#   The image with its registry spelled out, as the container runtime
#   resolves it: a first path part with a dot or a colon, or "localhost", is a
#   registry; anything else comes from docker.io (library/ for single names).
qualified_image(image) := image if {
	parts := split(image, "/")
	count(parts) > 1
	registry_host(parts[0])
} else := concat("/", ["docker.io", image]) if {
	contains(image, "/")
} else := concat("/", ["docker.io", "library", image])

registry_host(part) if contains(part, ".")

registry_host(part) if contains(part, ":")

registry_host("localhost")
