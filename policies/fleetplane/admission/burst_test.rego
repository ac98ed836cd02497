package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# Issue 34 (bursting): only the controller's burst concern, under the burst
# policy, lets a team's pods tolerate the burst tiers' taint.
burst_on_demand := {"key": "fleetplane.dev/burst-tier", "operator": "Equal", "value": "on-demand", "effect": "NoSchedule"}

burst_cases := {
	"no tolerations": [tolerating([]), set()],
	"the spot capacity taint": [tolerating([testing.spot_toleration]), set()],
	"a node outage for five minutes": [
		tolerating([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}]),
		set(),
	],
	"the on-demand tier": [tolerating([burst_on_demand]), {"burst-toleration"}],
	"every tier": [tolerating([{"key": "fleetplane.dev/burst-tier", "operator": "Exists"}]), {"burst-toleration"}],
	"the spot tier, NoSchedule": [tolerating([{"key": "fleetplane.dev/burst-tier", "operator": "Exists", "value": "spot", "effect": "NoSchedule"}]), {"burst-toleration"}],
	"every taint": [tolerating([{"operator": "Exists"}]), {"burst-toleration"}],
	"the tier's NoExecute (no such taint)": [tolerating([{"key": "fleetplane.dev/burst-tier", "operator": "Exists", "effect": "NoExecute"}]), set()],
	"a deployment's template": [testing.deployment(testing.with_spec(testing.inference, {"tolerations": [burst_on_demand]}), 1), {"burst-toleration"}],
	"a job's template": [testing.job(testing.with_spec(testing.training, {"tolerations": [burst_on_demand]}), {}), {"burst-toleration"}],
}

burst_rules(rev) := {r | some r in rules(rev); r == "burst-toleration"}

test_burst_tolerations[name] if {
	some name, [rev, want] in burst_cases
	burst_rules(rev) == want
}

test_burst_toleration_message_says_what_to_do if {
	some_message(burst_cases["the on-demand tier"][0], "burst-toleration: pod tolerates the burst tiers' taint fleetplane.dev/burst-tier; bursting is granted by the controller under the burst policy")
	some_message(burst_cases["the on-demand tier"][0], "remove the toleration")
}

test_every_taint_names_the_burst_tiers_and_the_maintenance_taints if {
	rev := burst_cases["every taint"][0]
	some_message(rev, "burst-toleration: pod tolerates every taint, the burst tiers' fleetplane.dev/burst-tier included")
	"maintenance-toleration" in rules(rev)
}

test_burst_tolerations_are_judged_for_cpu_pods_too if {
	"burst-toleration" in rules(testing.pod(testing.with_spec(testing.cpu, {"tolerations": [burst_on_demand]})))
}

test_burst_tolerations_are_left_to_the_full_rules if {
	not admission.fast_response with input as burst_cases["the on-demand tier"][0]
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

# The controller's burst concern adds the toleration to a waiting pod.
waiting := testing.pod(testing.training).request.object

admitted_to_burst := testing.as_update(tolerating([burst_on_demand]), waiting)

test_a_user_update_adding_a_burst_toleration_is_refused if {
	"burst-toleration" in rules(admitted_to_burst)
}

test_the_controller_adds_a_burst_toleration if {
	rev := testing.by(admitted_to_burst, testing.config.platform.controller_service_account, [])
	not "burst-toleration" in rules(rev)
	allowed(rev)
}

test_a_platform_admin_adds_a_burst_toleration if {
	not "burst-toleration" in rules(testing.by(admitted_to_burst, "root@example.com", ["fleetplane-admins"]))
}

test_a_workload_controller_may_not_add_a_burst_toleration if {
	some writer in testing.config.platform.workload_controllers
	"burst-toleration" in rules(testing.by(admitted_to_burst, writer, []))
}

test_a_pod_created_by_a_workload_controller_may_not_carry_one if {
	some writer in testing.config.platform.workload_controllers
	"burst-toleration" in rules(testing.by(burst_cases["the on-demand tier"][0], writer, []))
}

# After the controller's update, the user's later updates keep its toleration.
test_a_user_update_keeping_the_controllers_toleration_is_admitted if {
	burst := testing.with_spec(testing.training, {"tolerations": [burst_on_demand]})
	old := testing.pod(burst).request.object
	outage := {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
	rev := testing.as_update(testing.pod(testing.with_spec(testing.training, {"tolerations": [burst_on_demand, outage]})), old)
	not "burst-toleration" in rules(rev)
}
