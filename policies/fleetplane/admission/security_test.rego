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

# ------------------------------------------------------ pod security: baseline

web(extra) := object.union({"name": "web", "image": "nvcr.io/x"}, extra)

cpu_with(container_extra, spec_extra) := testing.with_spec(testing.replace_spec(testing.cpu, "containers", [web(container_extra)]), spec_extra)

context(sc) := {"securityContext": sc}

baseline_cases := {
	"capability beyond the default set": [cpu_with(context({"capabilities": {"add": ["SYS_ADMIN"]}}), {}), {"capabilities"}],
	"capability of the default set": [cpu_with(context({"capabilities": {"add": ["NET_BIND_SERVICE", "CHOWN"]}}), {}), set()],
	"dropping capabilities": [cpu_with(context({"capabilities": {"drop": ["ALL"]}}), {}), set()],
	"host port": [cpu_with({"ports": [{"containerPort": 80, "hostPort": 80}]}, {}), {"host-ports"}],
	"host port zero": [cpu_with({"ports": [{"containerPort": 80, "hostPort": 0}]}, {}), set()],
	"container port only": [cpu_with({"ports": [{"containerPort": 80}]}, {}), set()],
	"windows host process container": [cpu_with(context({"windowsOptions": {"hostProcess": true}}), {}), {"host-process"}],
	"windows host process pod": [cpu_with({}, context({"windowsOptions": {"hostProcess": true}})), {"host-process"}],
	"unmasked proc": [cpu_with(context({"procMount": "Unmasked"}), {}), {"proc-mount"}],
	"default proc": [cpu_with(context({"procMount": "Default"}), {}), set()],
	"seccomp unconfined container": [cpu_with(context({"seccompProfile": {"type": "Unconfined"}}), {}), {"seccomp"}],
	"seccomp unconfined pod": [cpu_with({}, context({"seccompProfile": {"type": "Unconfined"}})), {"seccomp"}],
	"seccomp runtime default": [cpu_with(context({"seccompProfile": {"type": "RuntimeDefault"}}), context({"seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}})), set()],
	"apparmor unconfined container": [cpu_with(context({"appArmorProfile": {"type": "Unconfined"}}), {}), {"apparmor"}],
	"apparmor unconfined pod": [cpu_with({}, context({"appArmorProfile": {"type": "Unconfined"}})), {"apparmor"}],
	"selinux type of another domain": [cpu_with(context({"seLinuxOptions": {"type": "spc_t"}}), {}), {"selinux"}],
	"selinux user on the pod": [cpu_with({}, context({"seLinuxOptions": {"user": "system_u"}})), {"selinux"}],
	"selinux container type and level": [cpu_with(context({"seLinuxOptions": {"type": "container_t", "level": "s0:c1,c2"}}), {}), set()],
	"unsafe sysctl": [cpu_with({}, context({"sysctls": [{"name": "kernel.msgmax", "value": "1"}]})), {"sysctls"}],
	"safe sysctl": [cpu_with({}, context({"sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]})), set()],
	"probe aimed at another host": [cpu_with({"livenessProbe": {"httpGet": {"host": "10.0.0.1", "port": 80}}}, {}), {"host-probes"}],
	"lifecycle aimed at another host": [cpu_with({"lifecycle": {"preStop": {"tcpSocket": {"host": "metadata", "port": 80}}}}, {}), {"host-probes"}],
	"probe of the pod itself": [cpu_with({"readinessProbe": {"httpGet": {"path": "/", "port": 80}}}, {}), set()],
	"allowPrivilegeEscalation is baseline": [cpu_with(context({"allowPrivilegeEscalation": true, "runAsUser": 0}), {}), set()],
}

test_baseline[name] if {
	some name, [tmpl, want] in baseline_cases
	rules(testing.pod(tmpl)) == want
}

apparmor_cases := {
	"unconfined": ["unconfined", {"apparmor"}],
	"runtime default": ["runtime/default", set()],
	"localhost": ["localhost/k8s-apparmor-example", set()],
}

test_apparmor_annotation[name] if {
	some name, [value, want] in apparmor_cases
	tmpl := testing.with_annotations(testing.cpu, {"container.apparmor.security.beta.kubernetes.io/web": value})
	rules(testing.pod(tmpl)) == want
}

test_baseline_message_cites_the_standard if {
	some_message(testing.pod(baseline_cases["capability beyond the default set"][0]), `capabilities: pod containers "web" adds capabilities SYS_ADMIN; remove them from securityContext.capabilities.add (Pod Security Standards, baseline allows only AUDIT_WRITE`)
}

test_baseline_applies_to_init_and_ephemeral_containers if {
	rev := testing.pod(testing.with_spec(testing.cpu, {"initContainers": [web({"name": "init", "securityContext": {"capabilities": {"add": ["NET_ADMIN"]}}})]}))
	rules(rev) == {"capabilities"}
}

# ---------------------------------------------------- pod security: restricted

restricted_config := object.union(testing.config, {"workload_types": {"training": {"pod_security": "restricted"}}})

restricted_rules(rev) := {split(m, ":")[0] | some m in result} if {
	result := admission.deny with input as rev
		with data.fleetplane.config as restricted_config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

hardened_context := {
	"allowPrivilegeEscalation": false,
	"runAsNonRoot": true,
	"seccompProfile": {"type": "RuntimeDefault"},
	"capabilities": {"drop": ["ALL"]},
}

hardened := testing.replace_spec(testing.training, "containers", [object.union(testing.container("main", {"nvidia.com/gpu": "8"}), {"securityContext": hardened_context})])

hardened_with(patch) := testing.replace_spec(testing.training, "containers", [object.union(testing.container("main", {"nvidia.com/gpu": "8"}), {"securityContext": object.union(hardened_context, patch)})])

restricted_cases := {
	"hardened": [hardened, set()],
	"plain training": [testing.training, {"privilege-escalation", "run-as-non-root", "seccomp", "capabilities"}],
	"escalation allowed": [hardened_with({"allowPrivilegeEscalation": true}), {"privilege-escalation"}],
	"root user": [hardened_with({"runAsUser": 0}), {"run-as-non-root"}],
	"root allowed": [hardened_with({"runAsNonRoot": false}), {"run-as-non-root"}],
	"capability added": [hardened_with({"capabilities": {"drop": ["ALL"], "add": ["CHOWN"]}}), {"capabilities"}],
	"bind service added": [hardened_with({"capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}), set()],
	"non-root and seccomp from the pod": [
		testing.with_spec(
			testing.replace_spec(testing.training, "containers", [object.union(testing.container("main", {"nvidia.com/gpu": "8"}), {"securityContext": {"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}})]),
			{"securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}}},
		),
		set(),
	],
	"root on the pod": [testing.with_spec(hardened, {"securityContext": {"runAsUser": 0}}), {"run-as-non-root"}],
	"nfs volume": [testing.with_spec(hardened, {"volumes": [{"name": "data", "nfs": {"server": "nfs", "path": "/"}}]}), {"volume-types"}],
	"pvc and image volumes": [testing.with_spec(hardened, {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "d"}}, {"name": "m", "image": {"reference": "nvcr.io/models/x:1"}}]}), set()],
}

test_restricted[name] if {
	some name, [tmpl, want] in restricted_cases
	restricted_rules(testing.pod(tmpl)) == want
}

test_restricted_applies_to_the_type_only if {
	restricted_rules(testing.pod(testing.cpu)) == set()
	restricted_rules(testing.pod(testing.notebook)) == set()
}

test_pod_security_level if {
	admission.pod_security_level({"labels": {}}) == "baseline"
	admission.pod_security_level({"labels": {"fleetplane.dev/workload-type": "unknown"}}) == "baseline"
	admission.pod_security_level({"labels": {"fleetplane.dev/workload-type": "training"}}) == "baseline" with data.fleetplane.config as testing.config
	admission.pod_security_level({"labels": {"fleetplane.dev/workload-type": "training"}}) == "restricted" with data.fleetplane.config as restricted_config
	malformed := object.union(testing.config, {"workload_types": {"training": {"pod_security": "lenient"}}})
	admission.pod_security_level({"labels": {"fleetplane.dev/workload-type": "training"}}) == "restricted" with data.fleetplane.config as malformed
}

# ------------------------------------------------------------ image volumes

test_image_volume_registry_is_checked if {
	rev := testing.pod(testing.with_spec(testing.cpu, {"volumes": [{"name": "models", "image": {"reference": "docker.io/acme/weights:1"}}]}))
	rules(rev) == {"image-registry"}
	some_message(rev, `image-registry: pod volume "models" uses image "docker.io/acme/weights:1"`)
}

test_image_volume_from_an_allowed_registry if {
	rules(testing.pod(testing.with_spec(testing.cpu, {"volumes": [{"name": "models", "image": {"reference": "nvcr.io/models/x:1"}}]}))) == set()
}

test_image_volume_without_a_string_reference_is_denied if {
	rules(testing.pod(testing.with_spec(testing.cpu, {"volumes": [{"name": "models", "image": {"reference": 7}}]}))) == {"image-registry"}
}

# ------------------------------------------------- pod updates: what changes

test_pod_update_judges_a_changed_container if {
	old := testing.pod(testing.cpu).request.object
	changed := testing.pod(testing.replace_spec(testing.cpu, "containers", [{"name": "web", "image": "registry.fleetplane.internal/web:1", "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}]))
	rules(testing.as_update(changed, old)) == {"capabilities"}
}

test_pod_update_judges_a_new_ephemeral_container_for_every_container_rule if {
	old := testing.pod(testing.cpu).request.object
	debug := {"name": "debug", "image": "busybox", "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}, "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}
	rev := object.union(
		testing.as_update(testing.pod(testing.with_spec(testing.cpu, {"ephemeralContainers": [debug]})), old),
		{"request": {"subResource": "ephemeralcontainers"}},
	)
	rules(rev) == {"image-registry", "capabilities", "accelerator-access"}
}

test_pod_update_leaves_an_existing_ephemeral_container if {
	debug := {"name": "debug", "image": "busybox"}
	pod := testing.pod(testing.with_spec(testing.cpu, {"ephemeralContainers": [debug]}))
	rules(object.union(testing.as_update(pod, pod.request.object), {"request": {"subResource": "ephemeralcontainers"}})) == set()
}
