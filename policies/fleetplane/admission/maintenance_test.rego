package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# Issue 33: a team pod that tolerates the platform's maintenance taints runs
# on nodes being drained, upgraded or repaired.
toleration_cases := {
	"no tolerations": [tolerating([]), set()],
	"a node outage for five minutes": [
		tolerating([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}, {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
		set(),
	],
	"the accelerator taint": [tolerating([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]), set()],
	"the cordon": [tolerating([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}]), {"maintenance-toleration"}],
	"the cordon, any effect": [tolerating([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]), {"maintenance-toleration"}],
	"the quarantine of one fault": [tolerating([{"key": "fleetplane.dev/gpu-unhealthy", "operator": "Equal", "value": "ecc", "effect": "NoSchedule"}]), {"maintenance-toleration"}],
	"every taint": [tolerating([{"operator": "Exists"}]), {"maintenance-toleration"}],
	"every NoExecute taint": [tolerating([{"operator": "Exists", "effect": "NoExecute"}]), set()],
}

tolerating(tolerations) := testing.pod(testing.with_spec(testing.training, {"tolerations": tolerations}))

test_maintenance_tolerations[name] if {
	some name, [rev, want] in toleration_cases
	{r | some r in rules(rev); r == "maintenance-toleration"} == want
}

test_maintenance_toleration_message_says_what_to_change if {
	some_message(toleration_cases["every taint"][0], "maintenance-toleration: pod tolerates every taint; the platform's maintenance taints (fleetplane.dev/gpu-unhealthy, node.kubernetes.io/unschedulable)")
}

test_maintenance_tolerations_are_judged_for_cpu_pods_too if {
	rev := testing.pod(testing.with_spec(testing.cpu, {"tolerations": [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]}))
	"maintenance-toleration" in rules(rev)
}

test_maintenance_tolerations_are_left_to_the_full_rules if {
	not admission.fast_response with input as toleration_cases["the cordon"][0]
}

test_maintenance_tolerations_are_judged_when_a_pod_update_adds_one if {
	old := testing.pod(testing.training).request.object
	rev := testing.as_update(toleration_cases["the cordon"][0], old)
	"maintenance-toleration" in rules(rev)
}
