package fleetplane.decisions.health_test

import data.fleetplane.decisions.health
import data.fleetplane.testing

decide(request) := result if {
	result := health.decision with input as request with data.fleetplane.config as testing.config
}

now := 1795000000

node := {"metadata": {"name": "gpu-1", "labels": {"fleetplane.dev/pool": "h100-spot"}}}

ecc := {"kind": "uncorrectable-ecc", "remedy": "gpu-reset", "gpu": "3", "reason": "Xid 48"}

quarantine := {"action": "quarantine", "node": node, "pool": "h100-spot", "pool_nodes": 20, "pool_out_of_service": 1, "fault": ecc, "state": null, "now": now}

with_(request, changes) := object.union(request, changes)

test_quarantine_allowed_below_the_throttle if {
	decide(quarantine) == {"allow": true, "reasons": ["quarantine allowed: fault, node_in_pool, throttle"]}
}

test_quarantine_stops_at_the_throttle if {
	decide(with_(quarantine, {"pool_out_of_service": 2})) == {"allow": false, "reasons": [
		"2 of 20 nodes of pool \"h100-spot\" are already out of service for health; max_unavailable \"10%\" allows 2",
	]}
}

test_node_already_out_takes_no_slot if {
	decide(with_(quarantine, {"pool_out_of_service": 2, "already_out_of_service": true})).allow
}

fault_cases := {
	"application xid": [{"kind": "application", "remedy": null}, false],
	"contained ecc": [{"kind": "contained-ecc", "remedy": null}, false],
	"degraded": [{"kind": "degraded", "remedy": null}, false],
	"thermal is not a quarantine": [{"kind": "thermal", "remedy": "cordon"}, false],
	"fallen off the bus": [{"kind": "fallen-off-bus", "remedy": "reboot"}, true],
	"row remap failure": [{"kind": "row-remap-failure", "remedy": "replace"}, true],
	"gsp": [{"kind": "gpu-error", "remedy": "gpu-reset"}, true],
	"unknown remedy": [{"kind": "gpu-error", "remedy": "pray"}, false],
	"no fault": [null, false],
}

test_quarantine_needs_a_node_fault[name] if {
	some name, [fault, want] in fault_cases
	decide(with_(quarantine, {"fault": fault})).allow == want
}

test_cordon_hot_only_for_thermal if {
	decide(with_(quarantine, {"action": "cordon-hot", "fault": {"kind": "thermal", "remedy": "cordon"}})).allow
	not decide(with_(quarantine, {"action": "cordon-hot"})).allow
}

test_node_must_be_in_the_pool if {
	decide(with_(quarantine, {"pool": "a100-on-demand", "pool_nodes": 4, "pool_out_of_service": 0})).reasons == [`the node's fleetplane.dev/pool label is "h100-spot", not "a100-on-demand"`]
}

state_cases := {
	"drain from quarantined": ["drain", "quarantined", true],
	"drain from draining": ["drain", "draining", false],
	"validate after remediation": ["validate", "remediating", true],
	"validate an operator-cleared node": ["validate", null, true],
	"return from validating": ["return", "validating", true],
	"return from remediating": ["return", "remediating", false],
	"uncordon a hot node": ["uncordon-cool", "hot", true],
	"uncordon a quarantined node": ["uncordon-cool", "quarantined", false],
	"replacement after validation": ["needs-replacement", "validating", true],
	"replacement from hot": ["needs-replacement", "hot", false],
}

test_steps_follow_the_state_machine[name] if {
	some name, [action, state, want] in state_cases
	request := {"action": action, "node": node, "pool": "h100-spot", "state": state, "now": now}
	decide(request).allow == want
}

test_request_remediation_needs_a_remedy_a_node_can_do if {
	base := {"action": "request-remediation", "node": node, "pool": "h100-spot", "state": "draining", "now": now}
	decide(with_(base, {"remedy": "gpu-reset"})).allow
	decide(with_(base, {"remedy": "reboot"})).allow
	not decide(with_(base, {"remedy": "replace"})).allow
	not decide(base).allow
}

test_evictions_must_be_explained if {
	base := {"action": "evict", "node": node, "pool": "h100-spot", "state": "draining", "now": now}
	decide(with_(base, {"evictions": [{"pod": "ns/a", "why": "checkpointed"}]})).allow
	not decide(with_(base, {"evictions": [{"pod": "ns/a"}]})).allow
	not decide(with_(base, {"evictions": []})).allow
	not decide(base).allow
}

test_missing_input_never_allows if {
	decide({}).reasons == [
		"input.action must be one of cordon-hot, drain, evict, gpu-reset, needs-replacement, quarantine, reboot, request-remediation, return, uncordon-cool, validate",
		"input.now must be a non-negative integer",
	]
	not decide(object.remove(quarantine, ["node"])).allow
	not decide(object.remove(quarantine, ["pool"])).allow
	not decide(object.remove(quarantine, ["pool_nodes"])).allow
	not decide(object.remove(quarantine, ["now"])).allow
	not decide("quarantine").allow
}

# ------------------------------------------------ remedies the controller carries out itself

acting_config := object.union(testing.config, {"health": {"recovery": "act"}})

decide_acting(request) := result if {
	result := health.decision with input as request with data.fleetplane.config as acting_config
}

cordoned := object.union(node, {"spec": {"unschedulable": true}})

reset := {"action": "gpu-reset", "node": cordoned, "pool": "h100-spot", "state": "remediating", "remedy": "gpu-reset", "gpu_pods": 0, "now": now}

test_gpu_reset_on_a_cordoned_drained_node if {
	decide_acting(reset) == {"allow": true, "reasons": ["gpu-reset allowed: cordoned, drained, node_in_pool, recovery_acts, remedy_asked, state"]}
	decide_acting(with_(reset, {"action": "reboot", "remedy": "reboot"})).allow
}

test_gpu_reset_refused_unless_every_check_holds if {
	decide_acting(with_(reset, {"gpu_pods": 1})).reasons == ["gpu-reset needs a node without GPU work; gpu_pods is 1"]
	decide_acting(with_(reset, {"node": {"spec": {"unschedulable": false}}})).reasons == ["gpu-reset needs a cordoned node"]
	decide_acting(with_(reset, {"remedy": "reboot"})).reasons == [`the node's remedy is "reboot", not gpu-reset`]
	decide_acting(with_(reset, {"state": "draining"})).reasons == [`gpu-reset is not a step from state "draining"`]
	not decide_acting(object.remove(reset, ["gpu_pods"])).allow
	not decide_acting(object.remove(reset, ["remedy"])).allow
}

test_gpu_reset_refused_when_recovery_annotates if {
	annotating := object.union(testing.config, {"health": {"recovery": "annotate"}})
	answer := health.decision with input as reset with data.fleetplane.config as annotating
	answer.reasons == [`health.recovery is "annotate": the controller only asks an integration (annotate), it does not act`]
	not decide(reset).allow
}
