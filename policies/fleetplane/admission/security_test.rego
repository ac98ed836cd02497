package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

cpu_with_image(image) := testing.replace_spec(testing.cpu, "containers", [{"name": "web", "image": image}])

image_cases := {
	"docker hub short name": {"image": "ubuntu:24.04", "allowed": false},
	"docker hub organisation": {"image": "pytorch/pytorch:2.3.0", "allowed": false},
	"docker hub spelled out": {"image": "docker.io/library/ubuntu", "allowed": false},
	"lookalike registry": {"image": "nvcr.io.example.com/nvidia/pytorch", "allowed": false},
	"localhost registry": {"image": "localhost/tool", "allowed": false},
	"registry with port": {"image": "registry.fleetplane.internal:5000/tool", "allowed": false},
	"allowed registry": {"image": "nvcr.io/nvidia/pytorch:24.05-py3", "allowed": true},
	"allowed registry with digest": {"image": "registry.fleetplane.internal/ml/train@sha256:0123", "allowed": true},
}

test_image_registry[name] if {
	some name, tc in image_cases
	rev := testing.pod(cpu_with_image(tc.image))
	want := {true: set(), false: {"image-registry"}}[tc.allowed]
	rules(rev) == want
}

test_image_message_lists_registries if {
	some_message(testing.pod(cpu_with_image("ubuntu")), `image-registry: pod containers "web" uses image "ubuntu" from a registry that is not allowed; use an image from: nvcr.io/, registry.fleetplane.internal/`)
}

test_init_and_accelerator_containers_are_checked if {
	rev := testing.pod(testing.with_spec(testing.training, {"initContainers": [{"name": "fetch", "image": "busybox"}]}))
	rules(rev) == {"image-registry"}
	some_message(rev, `pod initContainers "fetch" uses image "busybox"`)
}

test_registry_without_trailing_slash_is_a_prefix_of_whole_hosts if {
	config := object.union(testing.config, {"registries": ["nvcr.io"]})
	admission.allowed_image("nvcr.io/nvidia/cuda") with data.fleetplane.config as config
	not admission.allowed_image("nvcr.io.example.com/cuda") with data.fleetplane.config as config
}

qualified_cases := {
	"ubuntu": "docker.io/library/ubuntu",
	"org/app:1": "docker.io/org/app:1",
	"quay.io/org/app": "quay.io/org/app",
	"localhost/app": "localhost/app",
	"host:5000/app": "host:5000/app",
}

test_qualified_image[image] if {
	some image, want in qualified_cases
	admission.qualified_image(image) == want
}

security_cases := {
	"privileged container": {"input": testing.pod(testing.replace_spec(testing.cpu, "containers", [{"name": "web", "image": "nvcr.io/x", "securityContext": {"privileged": true}}])), "want": {"privileged"}},
	"unprivileged container": {"input": testing.pod(testing.replace_spec(testing.cpu, "containers", [{"name": "web", "image": "nvcr.io/x", "securityContext": {"privileged": false}}])), "want": set()},
	"host network": {"input": testing.pod(testing.with_spec(testing.cpu, {"hostNetwork": true})), "want": {"host-namespaces"}},
	"host pid": {"input": testing.pod(testing.with_spec(testing.cpu, {"hostPID": true})), "want": {"host-namespaces"}},
	"host ipc": {"input": testing.pod(testing.with_spec(testing.cpu, {"hostIPC": true})), "want": {"host-namespaces"}},
	"host namespaces off": {"input": testing.pod(testing.with_spec(testing.cpu, {"hostNetwork": false, "hostPID": false, "hostIPC": false})), "want": set()},
	"host path volume": {"input": testing.pod(testing.with_spec(testing.cpu, {"volumes": [{"name": "root", "hostPath": {"path": "/"}}]})), "want": {"host-path"}},
	"empty dir volume": {"input": testing.pod(testing.with_spec(testing.cpu, {"volumes": [{"name": "scratch", "emptyDir": {}}]})), "want": set()},
	"privileged accelerator pod in a deployment": {
		"input": testing.deployment(testing.replace_spec(testing.training, "containers", [object.union(testing.container("main", {"nvidia.com/gpu": "1"}), {"securityContext": {"privileged": true}})]), 1),
		"want": {"privileged"},
	},
}

test_security[name] if {
	some name, tc in security_cases
	rules(tc.input) == tc.want
}

test_host_path_message_names_the_volume if {
	some_message(security_cases["host path volume"].input, `host-path: pod mounts hostPath volume "root"`)
}

# ------------------------------------------------------------ pod updates

running := testing.pod(cpu_with_image("ubuntu")).request.object

update_cases := {
	"unchanged image admitted before": {"input": testing.as_update(testing.pod(cpu_with_image("ubuntu")), running), "want": set()},
	"new image from a disallowed registry": {"input": testing.as_update(testing.pod(cpu_with_image("alpine")), running), "want": {"image-registry"}},
	"new image from an allowed registry": {"input": testing.as_update(testing.pod(cpu_with_image("nvcr.io/x")), running), "want": set()},
	"update without the old object": {"input": testing.as_update(testing.pod(cpu_with_image("alpine")), null), "want": {"image-registry"}},
	"privileged ephemeral container": {
		"input": object.union(
			testing.as_update(testing.pod(testing.with_spec(cpu_with_image("ubuntu"), {"ephemeralContainers": [{"name": "debug", "image": "nvcr.io/debug", "securityContext": {"privileged": true}}]})), running),
			{"request": {"subResource": "ephemeralcontainers"}},
		),
		"want": {"privileged"},
	},
	"accelerator rules are not re-judged": {
		"input": testing.as_update(testing.pod(testing.without_spec_field(testing.training, "priorityClassName")), testing.pod(testing.training).request.object),
		"want": set(),
	},
	"host namespaces are not re-judged": {
		"input": testing.as_update(testing.pod(testing.with_spec(testing.cpu, {"hostPID": true})), testing.pod(testing.with_spec(testing.cpu, {"hostPID": true})).request.object),
		"want": set(),
	},
}

test_pod_update[name] if {
	some name, tc in update_cases
	rules(tc.input) == tc.want
}
