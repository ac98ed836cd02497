package fleetplane.decisions.upgrade_test

import data.fleetplane.decisions.upgrade
import data.fleetplane.testing

decide(request, config) := result if {
	result := upgrade.decision with input as request with data.fleetplane.config as config
}

# Days of the fixture's week (UTC): Wednesday 2026-11-18 00:00 and Saturday 2026-11-21 00:00.
wednesday := 1794960000

saturday := wednesday + (3 * 86400)

hour := 3600

node(pool) := {"metadata": {"name": "gpu-1", "labels": {"fleetplane.dev/pool": pool}}}

# The h100-spot pool (max_unavailable "10%") on a Saturday afternoon.
base := {"node": node("h100-spot"), "pool": "h100-spot", "pool_nodes": 20, "pool_unavailable": 1, "now": saturday + (14 * hour)}

at(seconds) := object.union(base, {"now": seconds})

test_weekend_upgrade_is_allowed if {
	decide(base, testing.config) == {"allow": true, "reasons": [
		"1 of 20 nodes unavailable, below max_unavailable \"10%\" = 2",
		"1795269600 is inside a maintenance window",
		"node belongs to pool h100-spot",
	]}
}

window_cases := {
	"saturday midnight": [saturday, true],
	"sunday last minute": [(saturday + 86400) + ((23 * hour) + 3599), true],
	"monday midnight": [saturday + (2 * 86400), false],
	"wednesday before the night window": [wednesday + ((21 * hour) + 3540), false],
	"wednesday night": [wednesday + (22 * hour), true],
	"thursday early morning of the night window": [(wednesday + 86400) + (3 * hour), true],
	"thursday end minute of the night window": [(wednesday + 86400) + ((4 * hour) + 59), true],
	"thursday after the night window": [(wednesday + 86400) + ((4 * hour) + 60), false],
	"thursday night": [(wednesday + 86400) + (23 * hour), false],
	"wednesday noon": [wednesday + (12 * hour), false],
}

test_maintenance_window[name] if {
	some name, [seconds, want] in window_cases
	decide(at(seconds), testing.config).allow == want
}

test_window_in_another_time_zone if {
	config := object.union(testing.config, {"upgrade": {"maintenance_windows": [{"days": ["wed"], "start": "12:00", "end": "12:30", "timezone": "Europe/Berlin"}]}})

	# 11:10 UTC is 12:10 in Berlin in November.
	decide(at(wednesday + ((11 * hour) + 600)), config).allow
	not decide(at(wednesday + ((12 * hour) + 600)), config).allow
}

test_outside_window_reason if {
	decide(at(wednesday + (12 * hour)), testing.config).reasons == [`1795003200 is outside every maintenance window [{"days":["sat","sun"],"end":"23:59","start":"00:00"},{"days":["wed"],"end":"04:00","start":"22:00"}]`]
}

unavailable_cases := {
	"percent rounds up": ["h100-spot", 11, 1, true],
	"percent of a large pool": ["h100-spot", 20, 1, true],
	"percent limit reached": ["h100-spot", 20, 2, false],
	"percent of a small pool is at least one": ["h100-spot", 5, 0, true],
	"percent of a small pool blocks a second node": ["h100-spot", 5, 1, false],
	"integer": ["a100-on-demand", 10, 1, true],
	"integer limit reached": ["a100-on-demand", 10, 2, false],
	"quarter of four": ["tpu-v5e", 4, 0, true],
}

test_unavailable[name] if {
	some name, [pool, nodes, unavailable, want] in unavailable_cases
	request := {"node": node(pool), "pool": pool, "pool_nodes": nodes, "pool_unavailable": unavailable, "now": base.now}
	decide(request, testing.config).allow == want
}

max_cases := {
	"integer": [3, 10, 3],
	"zero integer is at least one": [0, 10, 1],
	"percent rounded up": ["10%", 11, 2],
	"exact percent": ["50%", 10, 5],
	"zero percent is at least one": ["0%", 10, 1],
}

test_max_unavailable[name] if {
	some name, [value, nodes, want] in max_cases
	upgrade.max_unavailable(value, nodes) == want
}

test_max_unavailable_rejects[name] if {
	some name, value in {"text": "ten", "fraction": 1.5, "percent with fraction": "2.5%", "negative": -1}
	not upgrade.max_unavailable(value, 10)
}

test_malformed_max_unavailable_is_explained if {
	config := object.union(testing.config, {"pools": {"h100-spot": {"max_unavailable": "ten"}}})
	decide(base, config) == {"allow": false, "reasons": [`pool h100-spot has max_unavailable "ten"; it must be a non-negative integer or a percentage like "10%"`]}
}

deny_cases := {
	"unknown pool": {
		"input": object.union(base, {"pool": "nope", "node": node("nope")}),
		"reasons": [`pool "nope" is not configured`],
	},
	"node of another pool": {
		"input": object.union(base, {"node": node("a100-on-demand")}),
		"reasons": [`the node's fleetplane.dev/pool label is "a100-on-demand", not "h100-spot"`],
	},
	"node without a pool label": {
		"input": json.remove(base, ["node/metadata/labels"]),
		"reasons": [`the node's fleetplane.dev/pool label is null, not "h100-spot"`],
	},
	"pool at its limit": {
		"input": object.union(base, {"pool_unavailable": 2}),
		"reasons": [`2 of 20 nodes of pool h100-spot are unavailable; max_unavailable "10%" allows 2 at once`],
	},
}

test_denied[name] if {
	some name, tc in deny_cases
	decide(tc.input, testing.config) == {"allow": false, "reasons": tc.reasons}
}

malformed_cases := {
	"no input": {"input": null, "reasons": ["input must be an object", "input.node must be a Node object with metadata", "input.pool must be a non-empty string"]},
	"no node": {"input": object.remove(base, ["node"]), "reasons": ["input.node must be a Node object with metadata"]},
	"empty pool": {"input": object.union(base, {"pool": ""}), "reasons": ["input.pool must be a non-empty string"]},
	"negative time": {"input": object.union(base, {"now": -1}), "reasons": ["input.now must be a non-negative integer"]},
	"counts as text": {"input": object.union(base, {"pool_nodes": "20"}), "reasons": ["input.pool_nodes must be a non-negative integer"]},
	"more unavailable than nodes": {"input": object.union(base, {"pool_unavailable": 21}), "reasons": ["input.pool_unavailable must not exceed input.pool_nodes"]},
}

test_malformed_input_is_denied_naming_the_field[name] if {
	some name, tc in malformed_cases
	decide(tc.input, testing.config) == {"allow": false, "reasons": tc.reasons}
}

test_unexplained_check_has_a_generic_reason if {
	upgrade.failure("unknown") == "check unknown did not pass"
}

test_minutes if {
	upgrade.minutes("00:00") == 0
	upgrade.minutes("23:59") == 1439
	not upgrade.minutes("24:00")
	not upgrade.minutes("9:00")
}
