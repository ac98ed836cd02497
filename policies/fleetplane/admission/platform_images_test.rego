package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

platform_config := object.union(testing.config, {"platform_repositories": ["registry.fleetplane.internal/fleetplane/controller"]})

platform_deny(rev) := denied if {
	denied := admission.deny with input as rev with data.fleetplane.config as platform_config
}

platform_cases := {
	"by digest": {"image": "registry.fleetplane.internal/fleetplane/controller@sha256:0123", "denied": false},
	"tag and digest": {"image": "registry.fleetplane.internal/fleetplane/controller:0.1.0@sha256:0123", "denied": false},
	"by tag": {"image": "registry.fleetplane.internal/fleetplane/controller:0.1.0", "denied": true},
	"by name alone": {"image": "registry.fleetplane.internal/fleetplane/controller", "denied": true},
	"another repository of the registry": {"image": "registry.fleetplane.internal/fleetplane/controller-tools:1", "denied": false},
	"a repository below it": {"image": "registry.fleetplane.internal/fleetplane/controller:5000/x", "denied": false},
}

test_platform_images_only_by_digest[name] if {
	some name, tc in platform_cases
	rev := testing.pod(cpu_with_image(tc.image))
	found := {m | some m in platform_deny(rev); startswith(m, "platform-image-digest:")}
	count(found) == 1 == tc.denied
}

test_platform_image_message if {
	rev := testing.pod(cpu_with_image("registry.fleetplane.internal/fleetplane/controller:0.1.0"))
	some m in platform_deny(rev)
	startswith(m, `platform-image-digest: pod containers "web" uses the platform's image "registry.fleetplane.internal/fleetplane/controller:0.1.0" without a digest`)
}

test_no_platform_repositories_configured_changes_nothing if {
	rev := testing.pod(cpu_with_image("registry.fleetplane.internal/fleetplane/controller:0.1.0"))
	not "platform-image-digest" in rules(rev)
}

test_fast_path_leaves_a_platform_image_by_tag_to_the_full_rules if {
	rev := testing.pod(cpu_with_image("registry.fleetplane.internal/fleetplane/controller:0.1.0"))
	not admission.fast_response with input as rev with data.fleetplane.config as platform_config
	admission.fast_response with input as testing.pod(cpu_with_image("registry.fleetplane.internal/fleetplane/controller@sha256:0123")) with data.fleetplane.config as platform_config
}

test_non_string_image_is_not_a_platform_image if {
	not admission.platform_image_by_tag(7)
}
