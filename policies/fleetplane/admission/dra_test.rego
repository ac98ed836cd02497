package fleetplane.admission_test

import data.fleetplane.lib
import data.fleetplane.testing

dra_gpu := "deviceclass.resource.kubernetes.io/gpu.nvidia.com"

dra_training(limits) := testing.replace_spec(testing.training, "containers", [testing.container("main", limits)])

dra_cases := {
	# The implicit extended resource of the GPU class is a GPU: the valid
	# training template asking through it is admitted like nvidia.com/gpu.
	"training through the gpu class": [testing.pod(dra_training({dra_gpu: "8"})), set()],
	# Above the team's maximum (research: 64 without approval at 64): judged.
	"more gpus than the team may hold": [testing.pod(dra_training({dra_gpu: "65"})), rules(testing.pod(dra_training({"nvidia.com/gpu": "65"})))],
	# A request without its limit, a fraction: refused as for nvidia.com/gpu.
	"a fraction of a gpu": [testing.pod(dra_training({dra_gpu: "0.5"})), rules(testing.pod(dra_training({"nvidia.com/gpu": "0.5"})))],
	# Another class's implicit resource: refused.
	"another class": [
		testing.pod(dra_training({"nvidia.com/gpu": "8", "deviceclass.resource.kubernetes.io/other.example.com": "1"})),
		{"accelerator-access"},
	],
	"another class in requests": [
		testing.pod(testing.replace_spec(testing.cpu, "containers", [{"name": "web", "image": "registry.fleetplane.internal/web:1", "resources": {"requests": {"deviceclass.resource.kubernetes.io/x": "1"}}}])),
		{"accelerator-access"},
	],
}

test_dra_extended_resources[name] if {
	some name, [rev, want] in dra_cases
	rules(rev) == want
}

# The hole this closes: without a model the GPU class's resource is refused,
# as nvidia.com/gpu is (it used to pass unjudged).
test_dra_gpu_without_a_model_is_refused if {
	cpu_gpu := testing.replace_spec(testing.cpu, "containers", [testing.container("main", {dra_gpu: "1"})])
	got := rules(testing.pod(cpu_gpu))
	got == rules(testing.pod(testing.replace_spec(testing.cpu, "containers", [testing.container("main", {"nvidia.com/gpu": "1"})])))
	count(got) > 0
}

test_dra_gpu_is_priced_as_a_gpu if {
	lib.family(dra_gpu) == "nvidia.com/gpu"
	lib.is_accelerator(dra_gpu)
	not lib.family("deviceclass.resource.kubernetes.io/other.example.com")
}

test_dra_message_names_the_class if {
	some_message(dra_cases["another class"][0], `asks for deviceclass.resource.kubernetes.io/other.example.com, the extended resource of a DeviceClass the gate does not count`)
}
