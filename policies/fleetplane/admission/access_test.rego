package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

gpu_container(extra) := object.union(testing.container("main", {"nvidia.com/gpu": "8"}), extra)

training_with(extra) := testing.replace_spec(testing.training, "containers", [gpu_container(extra)])

cpu_container(extra) := object.union({"name": "web", "image": "registry.fleetplane.internal/web:1"}, extra)

cpu_with_container(extra) := testing.replace_spec(testing.cpu, "containers", [cpu_container(extra)])

env(name, value) := {"env": [{"name": name, "value": value}]}

gpu_toleration := {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}

access_cases := {
	# The runtime's device variables.
	"cpu pod asking the runtime for every gpu": [testing.pod(cpu_with_container(env("NVIDIA_VISIBLE_DEVICES", "all"))), {"accelerator-access"}],
	"gpu pod widening its devices": [testing.pod(training_with(env("NVIDIA_VISIBLE_DEVICES", "0,1,2,3,4,5,6,7"))), {"accelerator-access"}],
	"device variable from a reference": [testing.pod(cpu_with_container({"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]})), {"accelerator-access"}],
	"imex channels": [testing.pod(cpu_with_container(env("NVIDIA_IMEX_CHANNELS", "0"))), {"accelerator-access"}],
	"void": [testing.pod(cpu_with_container(env("NVIDIA_VISIBLE_DEVICES", "void"))), set()],
	"none": [testing.pod(cpu_with_container(env("NVIDIA_VISIBLE_DEVICES", "none"))), set()],
	"empty": [testing.pod(cpu_with_container(env("NVIDIA_VISIBLE_DEVICES", ""))), set()],
	"driver capabilities alone": [testing.pod(cpu_with_container(env("NVIDIA_DRIVER_CAPABILITIES", "all"))), set()],
	"cuda's own selection": [testing.pod(training_with(env("CUDA_VISIBLE_DEVICES", "0"))), set()],
	"init container": [testing.pod(testing.with_spec(testing.cpu, {"initContainers": [cpu_container(object.union({"name": "init"}, env("NVIDIA_VISIBLE_DEVICES", "all")))]})), {"accelerator-access"}],
	# Issue 33: the runtime's feature variables mount device nodes the device
	# plugin does not grant (RDMA, NVSwitch, GPUDirect Storage, gdrcopy) into
	# any container with GPUs; every container is held to it.
	"gpu container reaching the node's rdma network": [testing.pod(training_with(env("NVIDIA_MOFED", "enabled"))), {"accelerator-access"}],
	"gpu container reaching the nvswitch fabric": [testing.pod(training_with(env("NVIDIA_NVSWITCH", "enabled"))), {"accelerator-access"}],
	"gpu container reaching gpudirect storage": [testing.pod(training_with(env("NVIDIA_GDS", "enabled"))), {"accelerator-access"}],
	"gpu container reaching gdrcopy": [testing.pod(training_with(env("NVIDIA_GDRCOPY", "enabled"))), {"accelerator-access"}],
	"feature variable from a reference": [testing.pod(training_with({"env": [{"name": "NVIDIA_MOFED", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}}]})), {"accelerator-access"}],
	"feature variable in a sidecar": [
		testing.pod(testing.with_spec(testing.training, {"initContainers": [cpu_container(object.union({"name": "proxy", "restartPolicy": "Always"}, env("NVIDIA_GDS", "enabled")))]})),
		{"accelerator-access"},
	],
	"feature variable disabled": [testing.pod(training_with(env("NVIDIA_MOFED", "disabled"))), set()],
	"feature variable empty": [testing.pod(training_with(env("NVIDIA_NVSWITCH", ""))), set()],
	"a sidecar opting out of devices": [
		testing.pod(testing.with_spec(testing.training, {"initContainers": [cpu_container(object.union({"name": "proxy", "restartPolicy": "Always"}, env("NVIDIA_VISIBLE_DEVICES", "void")))]})),
		set(),
	],
	"a sidecar asking for the node's gpus": [
		testing.pod(testing.with_spec(testing.training, {"initContainers": [cpu_container(object.union({"name": "proxy", "restartPolicy": "Always"}, env("NVIDIA_VISIBLE_DEVICES", "all")))]})),
		{"accelerator-access"},
	],
	# ConfigMaps and Secrets on pods that land on accelerator nodes.
	"gpu pod with a prefix that could still spell a feature variable": [testing.pod(training_with({"envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "NVIDIA_M"}]})), {"accelerator-access"}],
	"gpu pod with a prefix ruling out every variable": [testing.pod(training_with({"envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "NVIDIA_X"}]})), set()],
	"gpu pod taking a configmap whole": [testing.pod(training_with({"envFrom": [{"configMapRef": {"name": "settings"}}]})), {"accelerator-access"}],
	"gpu pod taking a secret under a prefix": [testing.pod(training_with({"envFrom": [{"secretRef": {"name": "s"}, "prefix": "APP_"}]})), set()],
	"gpu pod with a prefix that could still spell the variable": [testing.pod(training_with({"envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "NVIDIA_"}]})), {"accelerator-access"}],
	"cpu pod taking a configmap whole": [testing.pod(cpu_with_container({"envFrom": [{"configMapRef": {"name": "settings"}}]})), set()],
	# Tolerations and node selection without a request.
	"cpu pod tolerating the gpu taint": [testing.pod(testing.with_spec(testing.cpu, {"tolerations": [gpu_toleration]})), {"accelerator-access"}],
	"cpu pod tolerating every taint": [testing.pod(testing.with_spec(testing.cpu, {"tolerations": [{"operator": "Exists"}]})), {"accelerator-access", "maintenance-toleration", "burst-toleration"}],
	"cpu pod tolerating the tpu taint": [testing.pod(testing.with_spec(testing.cpu, {"tolerations": [{"key": "google.com/tpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}]})), {"accelerator-access"}],
	"cpu pod tolerating another taint": [testing.pod(testing.with_spec(testing.cpu, {"tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}]})), set()],
	"zero gpus tolerating the gpu taint": [testing.pod(testing.with_spec(testing.with_limits(testing.training, {"nvidia.com/gpu": "0"}), {"tolerations": [gpu_toleration]})), {"accelerator-access"}],
	"gpu pod tolerating the gpu taint": [testing.pod(testing.with_spec(testing.training, {"tolerations": [gpu_toleration]})), set()],
	"cpu pod selecting gpu nodes": [testing.pod(testing.with_spec(testing.cpu, {"nodeSelector": {"nvidia.com/gpu.present": "true"}})), {"accelerator-access"}],
	"cpu pod selecting a model by affinity": [
		testing.pod(testing.with_spec(testing.cpu, {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "cloud.google.com/gke-tpu-accelerator", "operator": "Exists"}]}]}}}})),
		{"accelerator-access"},
	],
	"cpu pod keeping away from gpu nodes": [
		testing.pod(testing.with_spec(testing.cpu, {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "nvidia.com/gpu.present", "operator": "DoesNotExist"}]}]}}}})),
		set(),
	],
	# nodeName (dynamic resource allocation is judged by dra_claims.rego).
	"cpu pod naming its node": [testing.pod(testing.with_spec(testing.cpu, {"nodeName": "gpu-node-1"})), {"node-name"}],
	# Device nodes through the host's filesystem.
	"host path to the gpus": [testing.pod(testing.with_spec(testing.cpu, {"volumes": [{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}]})), {"host-path"}],
}

test_accelerator_access[name] if {
	some name, [rev, want] in access_cases
	rules(rev) == want
}

test_accelerator_access_messages_say_what_to_do if {
	some_message(access_cases["cpu pod asking the runtime for every gpu"][0], `accelerator-access: pod containers "web" sets NVIDIA_VISIBLE_DEVICES, which the NVIDIA container runtime reads to expose devices the gate cannot count; remove it and request the devices in resources.limits`)
	some_message(access_cases["gpu pod taking a configmap whole"][0], `takes its environment from configMap "settings" without a prefix`)
	some_message(access_cases["gpu container reaching the node's rdma network"][0], `accelerator-access: pod containers "main" sets NVIDIA_MOFED, which makes the NVIDIA container runtime mount device nodes the device plugin does not grant; remove it (or set it to "disabled")`)
	some_message(access_cases["gpu pod with a prefix that could still spell a feature variable"][0], "without a prefix that rules out NVIDIA_MIG_CONFIG_DEVICES, NVIDIA_MIG_MONITOR_DEVICES, NVIDIA_MOFED,")
	some_message(access_cases["cpu pod tolerating the gpu taint"][0], "tolerates the taint nvidia.com/gpu of accelerator nodes but requests no accelerator")
}

test_accelerator_access_in_every_template if {
	rev := testing.deployment(testing.with_spec(testing.cpu, {"tolerations": [gpu_toleration]}), 2)
	rules(rev) == {"accelerator-access"}
	some_message(rev, "accelerator-access: spec.template tolerates")
}

test_pod_update_adding_a_gpu_toleration_is_judged if {
	old := testing.pod(testing.cpu).request.object
	rev := testing.as_update(testing.pod(testing.with_spec(testing.cpu, {"tolerations": [gpu_toleration]})), old)
	rules(rev) == {"accelerator-access"}
}

test_pod_update_keeping_its_tolerations_is_not_judged_again if {
	pod := testing.pod(testing.with_spec(testing.cpu, {"tolerations": [gpu_toleration]}))
	rules(testing.as_update(pod, pod.request.object)) == set()
}

test_env_source_names if {
	admission.env_source({"secretRef": {"name": "s"}}) == `secret "s"`
	admission.env_source({"configMapRef": {"name": "c"}}) == `configMap "c"`
	admission.env_source({}) == "a source"
}

# Issue 33: an ephemeral container added to a running gpu pod is judged like
# any new container: it may not set the runtime's device or feature
# variables, nor take a ConfigMap whole.
ephemeral_cases := {
	"asking for the node's gpus": [env("NVIDIA_VISIBLE_DEVICES", "all"), {"accelerator-access"}],
	"reaching the rdma network": [env("NVIDIA_MOFED", "enabled"), {"accelerator-access"}],
	"taking a configmap whole": [{"envFrom": [{"configMapRef": {"name": "settings"}}]}, {"accelerator-access"}],
	"a plain debugger": [{}, set()],
}

test_ephemeral_container_in_a_gpu_pod[name] if {
	some name, [extra, want] in ephemeral_cases
	running := testing.pod(testing.training).request.object
	debug := cpu_container(object.union({"name": "debug"}, extra))
	rev := object.union(
		testing.as_update(testing.pod(testing.with_spec(testing.training, {"ephemeralContainers": [debug]})), running),
		{"request": {"subResource": "ephemeralcontainers"}},
	)
	rules(rev) == want
}
