# Supply chain: the platform's own images (the controller's and OPA's
# repositories, data.fleetplane.config.platform_repositories) run only by
# digest. A tag can be moved to other contents; a digest names the very bytes
# that were built, scanned and signed. Other images follow the registry rule.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib.workloads

deny contains msg if {
	some [where, entry] in checked_containers
	image := entry.container.image
	platform_image_by_tag(image)
	msg := sprintf(
		"platform-image-digest: %s uses the platform's image %q without a digest; name it by digest (REPOSITORY@sha256:...), as `fleetplane image build` prints it",
		[workloads.container_where(where, entry), image],
	)
}

# METADATA
# description: >-
#   An image of a platform repository named by tag or by nothing (no
#   @sha256: digest). Undefined for anything else, a non-string included.
platform_image_by_tag(image) if {
	is_string(image)
	not contains(image, "@sha256:")
	some repository in object.get(config, "platform_repositories", [])
	platform_repository_of(image, repository)
}

platform_repository_of(image, repository) if image == repository

platform_repository_of(image, repository) if {
	startswith(image, concat("", [repository, ":"]))

	# "repo:tag", not "repo:port/other" (a registry port is followed by a path)
	not contains(substring(image, count(repository) + 1, -1), "/")
}

# METADATA
# description: The fast path leaves reviews with such an image to the full rules.
fast_platform_image_by_tag(containers) if {
	some c in containers
	platform_image_by_tag(c.image)
}
