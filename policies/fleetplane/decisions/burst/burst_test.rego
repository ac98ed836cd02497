package fleetplane.decisions.burst_test

import data.fleetplane.decisions.burst
import data.fleetplane.testing

now := 1795003600

# 2026-11 in the spend record: the month of `now`.
month := "2026-11"

decide(request, spent) := result if {
	result := burst.decision with input as request
		with data.fleetplane.config as testing.config
		with data.fleetplane.spend as {"research": {"month": month, "usd": spent}}
		with data.fleetplane.reservations as {}
}

budget := testing.config.teams.research.monthly_budget_usd

pod := {"metadata": {"name": "train-0", "namespace": "ml-research", "labels": {"fleetplane.dev/workload-type": "training"}, "annotations": {"fleetplane.dev/checkpoint-location": "s3://ckpt/train"}}}

waiting := {
	"team": "research", "workload_type": "training", "pod": pod,
	"from_tier": "reserved", "to_tier": "on-demand",
	"to_pool": {"name": "h100-ondemand", "region": "eu-west-1"},
	"estimate_usd": 100, "pending_seconds": 600, "now": now,
}

given(patch) := object.union(waiting, patch)

test_training_bursts_from_reserved_to_on_demand_with_headroom if {
	answer := decide(waiting, 0)
	answer.allow == true
	startswith(answer.reasons[0], "research may burst from reserved to on-demand on pool h100-ondemand")
}

test_training_bursts_from_on_demand_to_spot_with_a_checkpoint_location if {
	decide(given({"from_tier": "on-demand", "to_tier": "spot"}), 0).allow == true
}

test_batch_skips_on_demand_it_may_not_use if {
	request := given({"workload_type": "batch", "to_tier": "spot"})
	decide(request, 0).allow == true
	decide(given({"workload_type": "batch"}), 0).allow == false
}

deny_cases := {
	"skips a tier": {
		"input": given({"to_tier": "spot"}),
		"reason": "spot is not the next tier after reserved that training may use (on-demand; capacity any)",
	},
	"inference never on spot": {
		"input": given({"workload_type": "inference", "from_tier": "on-demand", "to_tier": "spot"}),
		"reason": "spot is not the next tier after on-demand that inference may use (none; capacity on-demand)",
	},
	"spot without checkpoint location": {
		"input": json.remove(given({"from_tier": "on-demand", "to_tier": "spot"}), ["pod/metadata/annotations"]),
		"reason": "training must declare fleetplane.dev/checkpoint-location to run on spot",
	},
	"not waiting": {"input": given({"pending_seconds": 0}), "reason": "the work is not waiting"},
	"outside residency": {
		"input": given({"pod": {"metadata": {"labels": {"fleetplane.dev/data-residency": "us"}}}}),
		"reason": `pool h100-ondemand is in region "eu-west-1", outside the work's data residency us`,
	},
	"residency with unknown region": {
		"input": given({"pod": {"metadata": {"labels": {"fleetplane.dev/data-residency": "eu"}}}, "to_pool": {"name": "p", "region": ""}}),
		"reason": `pool p is in region "", outside the work's data residency eu`,
	},
}

test_denied[name] if {
	some name, case in deny_cases
	answer := decide(case.input, 0)
	answer.allow == false
	case.reason in answer.reasons
}

test_residency_inside_is_allowed if {
	decide(given({"pod": {"metadata": {"labels": {"fleetplane.dev/data-residency": "eu"}}}}), 0).allow == true
}

test_no_headroom_past_the_warning_line if {
	answer := decide(waiting, (budget * testing.config.budget.warn_ratio) - 50)
	answer.allow == false
	startswith(answer.reasons[0], "team research has no budget headroom for the burst")
}

test_exactly_at_the_warning_line_is_still_headroom if {
	decide(waiting, (budget * testing.config.budget.warn_ratio) - 100).allow == true
}

test_malformed_spend_never_allows if {
	answer := burst.decision with input as waiting
		with data.fleetplane.config as testing.config
		with data.fleetplane.spend as {"research": {"month": month, "usd": "lots"}}
		with data.fleetplane.reservations as {}
	answer.allow == false
	answer.reasons == ["team research has no budget headroom for the burst: its spend or reservations are malformed"]
}

malformed := {
	"not an object": ["x", "input must be an object"],
	"unknown team": [given({"team": "nobody"}), "input.team must be a team of the configuration"],
	"unknown type": [given({"workload_type": "mining"}), "input.workload_type must be a known workload type"],
	"bad tier": [given({"to_tier": "premium"}), "input.to_tier must be one of reserved, on-demand, spot"],
	"no from tier": [json.remove(waiting, ["from_tier"]), "input.from_tier must be one of reserved, on-demand, spot"],
	"no pod": [json.remove(waiting, ["pod"]), "input.pod must be a Pod object with metadata"],
	"no estimate": [json.remove(waiting, ["estimate_usd"]), "input.estimate_usd must be a non-negative number"],
	"negative wait": [given({"pending_seconds": -1}), "input.pending_seconds must be a non-negative number"],
	"no pool": [json.remove(waiting, ["to_pool"]), "input.to_pool must be {name, region}"],
}

test_malformed_never_allows[name] if {
	some name, [request, reason] in malformed
	answer := decide(request, 0)
	answer.allow == false
	reason in answer.reasons
}
