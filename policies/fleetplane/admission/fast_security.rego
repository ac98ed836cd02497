# Fast path, the security rules (see fast.rego): in every judged namespace
# nothing privileged, no host namespaces, no hostPath or image volumes, and
# the images' registries, denied with the full rules' messages; undefined
# whenever another security rule might fire, so the full rules answer.
package fleetplane.admission

import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   The security rules: in the platform's own namespaces there are none (the
#   full rules judge nothing there: undefined, so they answer); in every
#   other namespace nothing may be privileged, share host namespaces or mount
#   hostPath or image volumes, and each image from a registry that is not
#   allowed is denied with the full rules' message (image_registry_message).
#   Undefined when a rule other than the registry one would fire, or the
#   registries are configured in a way the fast path does not read.
fast_image_denials(ns, where, spec, containers, volumes) := denials if {
	fast_judged_namespace(ns)
	not spec.hostNetwork
	not spec.hostPID
	not spec.hostIPC
	not fast_special_volume(volumes)
	not fast_privileged(containers)
	not fast_platform_image_by_tag(containers)
	registries := data.fleetplane.config.registries
	is_array(registries)

	# Every registry entry names a host (contains "." or ":", or is
	# localhost) and ends with "/" (see registry_prefix): then an image that
	# starts with an entry is already qualified (qualified_image leaves it as
	# it is) and is allowed; any other image is allowed when its qualified
	# name starts with one. Any other configuration takes the full rules.
	count([r | some r in registries; regex.match(`^([^/]*[.:][^/]*|localhost)/(.*/)?$`, r)]) == count(registries)
	denials := [image_registry_message(workloads.container_where(where, {"list": "containers", "container": c, "index": i}), c.image) |
		some i, c in containers
		not strings.any_prefix_match(c.image, registries)
		not strings.any_prefix_match(qualified_image(c.image), registries)
	]
}

# A team's namespace (mapped to anything but false, null included, as the
# full rules see them), or one the reviewed list of the platform's own does
# not name.
fast_judged_namespace(ns) if {
	data.fleetplane.config.namespaces[ns]
} else if {
	system := data.fleetplane.config.system_namespaces
	is_array(system)
	not ns in system
}

fast_privileged(containers) if {
	some c in containers
	c.securityContext.privileged
}

fast_special_volume(volumes) if {
	some volume in volumes
	volume.hostPath
}

fast_special_volume(volumes) if {
	some volume in volumes
	volume.image
}
