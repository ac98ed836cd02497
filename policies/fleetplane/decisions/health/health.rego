# METADATA
# title: Health decision
# description: >-
#   May the controller take this step of GPU health remediation now? Every
#   step is asked: quarantining a node, cordoning a hot one, draining it,
#   evicting pods, requesting a reset or reboot, carrying out a GPU reset or a
#   node reboot itself (health.recovery "act": only on a cordoned node that
#   holds no GPU work), validating, returning it to service, marking it for
#   replacement. (How long work lives, orphans and
#   stragglers are the lifetime decision's.) Allowed only on explicit
#   evidence; missing input never allows.
package fleetplane.decisions.health

import data.fleetplane.config
import data.fleetplane.lib
import data.fleetplane.lib.workloads

# METADATA
# entrypoint: true
# description: '{"allow": bool, "reasons": [string]}, the answer the controller acts on.'
decision := {"allow": allow, "reasons": reasons}

default allow := false

allow if {
	count(input_problems) == 0
	every check in required_checks {
		check in passed
	}
}

reasons := sort([r | some r in evidence]) if {
	allow
} else := sort([p | some p in input_problems]) if {
	count(input_problems) > 0
} else := sort([failure(check) |
	some check in required_checks
	not check in passed
])

# ------------------------------------------------------------------ input

node_actions := {
	"quarantine", "cordon-hot", "drain", "evict", "request-remediation",
	"validate", "return", "uncordon-cool", "needs-replacement",
	"gpu-reset", "reboot",
}

# The remedies the controller carries out itself when health.recovery is "act".
acted_remedies := {"gpu-reset", "reboot"}

input_problems contains "input must be an object" if not is_object(input)

input_problems contains sprintf("input.action must be one of %s", [concat(", ", sort([a | some a in node_actions]))]) if {
	is_object(input)
	not valid_action
}

valid_action if input.action in node_actions

input_problems contains "input.now must be a non-negative integer" if {
	is_object(input)
	not workloads.is_whole(object.get(input, "now", null))
}

input_problems contains "input.node must be a Node object with metadata" if {
	input.action in node_actions
	not is_object(input.node.metadata)
}

input_problems contains "input.pool must be a non-empty string" if {
	input.action in node_actions
	not workloads.non_empty_string(input.pool)
}

# ----------------------------------------------------------------- facts

node_labels := workloads.as_object(object.get(workloads.as_object(input.node.metadata), "labels", {}))

health := workloads.as_object(object.get(config, "health", {}))

max_unavailable(value, _) := max({value, 1}) if workloads.is_whole(value)

max_unavailable(value, nodes) := max({ceil((percent * nodes) / 100), 1}) if {
	is_string(value)
	regex.match(`^(0|[1-9][0-9]*)%$`, value)
	percent := to_number(trim_suffix(value, "%"))
}

# METADATA
# description: Nodes of the pool the health machine may hold out of service at once (default "10%").
allowed_out := max_unavailable(object.get(health, "max_unavailable", "10%"), input.pool_nodes)

remedies := {"gpu-reset", "reboot", "replace"}

# Fault kinds that ask the node to leave service (controller/remediation/classify.py).
node_fault_kinds := {
	"uncorrectable-ecc", "gpu-error", "nvlink", "fallen-off-bus",
	"row-remap-pending", "row-remap-failure",
}

state_before := {
	"drain": {"quarantined"},
	"evict": {"draining"},
	"request-remediation": {"draining", "remediating", "validating"},
	"validate": {"remediating", "validating", null},
	"return": {"validating"},
	"uncordon-cool": {"hot"},
	"needs-replacement": {"draining", "remediating", "validating"},
	"gpu-reset": {"remediating"},
	"reboot": {"remediating"},
}

# ----------------------------------------------------------------- checks

required_checks contains "node_in_pool" if input.action in node_actions

required_checks contains "fault" if input.action in {"quarantine", "cordon-hot"}

required_checks contains "throttle" if input.action in {"quarantine", "cordon-hot"}

required_checks contains "state" if state_before[input.action]

required_checks contains "evictions_explained" if input.action == "evict"

required_checks contains "remedy" if input.action == "request-remediation"

required_checks contains "recovery_acts" if input.action in acted_remedies

required_checks contains "remedy_asked" if input.action in acted_remedies

required_checks contains "cordoned" if input.action in acted_remedies

required_checks contains "drained" if input.action in acted_remedies

passed contains "node_in_pool" if node_labels[lib.keys.pool] == input.pool

passed contains "fault" if {
	input.action == "quarantine"
	input.fault.kind in node_fault_kinds
	input.fault.remedy in remedies
}

passed contains "fault" if {
	input.action == "cordon-hot"
	input.fault.kind == "thermal"
}

# A node already out of service (hot, then a fault) takes no new slot.
passed contains "throttle" if input.already_out_of_service == true

passed contains "throttle" if {
	workloads.is_whole(input.pool_out_of_service)
	workloads.is_whole(input.pool_nodes)
	input.pool_out_of_service < allowed_out
}

passed contains "state" if input.state in state_before[input.action]

passed contains "evictions_explained" if {
	is_array(input.evictions)
	count(input.evictions) > 0
	every e in input.evictions {
		workloads.non_empty_string(e.pod)
		workloads.non_empty_string(e.why)
	}
}

passed contains "remedy" if input.remedy in {"gpu-reset", "reboot"}

passed contains "recovery_acts" if health.recovery == "act"

passed contains "remedy_asked" if input.remedy == input.action

passed contains "cordoned" if input.node.spec.unschedulable == true

passed contains "drained" if input.gpu_pods == 0

# ---------------------------------------------------------------- reasons

failures["node_in_pool"] := sprintf("the node's %s label is %s, not %s", [lib.keys.pool, json.marshal(object.get(node_labels, lib.keys.pool, null)), json.marshal(object.get(input, "pool", null))])

failures["fault"] := sprintf("fault %s does not ask for %s", [json.marshal(object.get(input, "fault", null)), input.action])

failures["throttle"] := sprintf("%s of %s nodes of pool %s are already out of service for health; max_unavailable %s allows %v", [json.marshal(object.get(input, "pool_out_of_service", null)), json.marshal(object.get(input, "pool_nodes", null)), json.marshal(object.get(input, "pool", null)), json.marshal(object.get(health, "max_unavailable", "10%")), allowed_out])

failures["throttle"] := "input.pool_nodes and input.pool_out_of_service must be non-negative integers" if not allowed_out

failures["state"] := sprintf("%s is not a step from state %s", [input.action, json.marshal(object.get(input, "state", null))])

failures["evictions_explained"] := "every eviction must name its pod and why"

failures["remedy"] := sprintf("remedy %s is not one a node can be asked for (gpu-reset, reboot)", [json.marshal(object.get(input, "remedy", null))])

failures["recovery_acts"] := sprintf("health.recovery is %s: the controller only asks an integration (annotate), it does not act", [json.marshal(object.get(health, "recovery", null))])

failures["remedy_asked"] := sprintf("the node's remedy is %s, not %s", [json.marshal(object.get(input, "remedy", null)), input.action])

failures["cordoned"] := sprintf("%s needs a cordoned node", [input.action])

failures["drained"] := sprintf("%s needs a node without GPU work; gpu_pods is %s", [input.action, json.marshal(object.get(input, "gpu_pods", null))])

failure(check) := msg if {
	msg := failures[check]
} else := sprintf("check %s did not pass", [check])

evidence contains sprintf("%s allowed: %s", [input.action, concat(", ", sort([c | some c in required_checks]))])
