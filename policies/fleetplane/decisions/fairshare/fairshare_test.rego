package fleetplane.decisions.fairshare_test

import data.fleetplane.decisions.fairshare
import data.fleetplane.testing

decide(request) := result if {
	result := fairshare.decision with input as request with data.fleetplane.config as testing.config
}

pod(namespace, labels, limits) := {
	"metadata": {"name": "p", "namespace": namespace, "labels": labels},
	"spec": {"containers": [{"name": "main", "image": "nvcr.io/x", "resources": {"limits": limits}}]},
}

# Analytics (weight 1) waits with 8 of its 16 deserved H100s; research holds 32,
# deserves 16, and would keep 24 after losing the 8-GPU training pod.
base := {
	"pool": {"family": "nvidia.com/gpu", "model": "h100-80gb", "capacity": 32},
	"claimant": {
		"pod": pod("analytics", {"fleetplane.dev/workload-type": "batch"}, {"nvidia.com/gpu": "8"}),
		"team": "analytics", "held": 8, "deserved": 16, "pending_seconds": 900,
	},
	"victim": {
		"pod": pod("ml-research", {"fleetplane.dev/workload-type": "training"}, {"nvidia.com/gpu": "8"}),
		"team": "research", "workload_type": "training", "running_seconds": 7200,
		"seconds_since_checkpoint": 300, "devices": 8, "team_held": 32, "team_deserved": 16,
		"queue_reclaimable": true, "gang": ["ml-research/p"],
	},
	"now": 1795003600,
}

victim(patch) := object.union(base, {"victim": patch})

claimant(patch) := object.union(base, {"claimant": patch})

test_a_team_above_its_share_gives_back_to_one_under_it if {
	decide(base) == {"allow": true, "reasons": [
		"team analytics holds 8, under its deserved share 16, and has work waiting 900s",
		"team research keeps 24 of its deserved 16 after losing 8 (queue reclaimable); victim training is preemptible and has run 7200s (minimum 600s)",
	]}
}

allow_cases := {
	"victim team lands exactly on its share": victim({"team_held": 24, "devices": 8}),
	"fractional share kept": victim({"team_held": 22, "devices": 4, "team_deserved": 17.5}),
	"preemptible label overrides the type": victim({"workload_type": "inference", "pod": {"metadata": {"labels": {"fleetplane.dev/preemptible": "true"}}}}),
	"run exactly the minimum": victim({"running_seconds": 600}),
	"claimant with nothing yet": claimant({"held": 0}),
}

test_allowed[name] if {
	some name, request in allow_cases
	decide(request).allow == true
}

deny_cases := {
	"same team": {
		"input": victim({"pod": {"metadata": {"namespace": "analytics"}}}),
		"reasons": ["both belong to team analytics: fair share is between teams"],
	},
	"claimant at its share": {
		"input": claimant({"held": 16}),
		"reasons": ["team analytics holds 16, not less than its deserved share 16"],
	},
	"queue not reclaimable": {
		"input": victim({"queue_reclaimable": false}),
		"reasons": ["the queue of team research is not reclaimable"],
	},
	"labelled not preemptible": {
		"input": victim({"pod": {"metadata": {"labels": {"fleetplane.dev/preemptible": "false"}}}}),
		"reasons": ["the victim is not preemptible (label fleetplane.dev/preemptible=false, training default true)"],
	},
	"type not preemptible": {
		"input": victim({"workload_type": "inference"}),
		"reasons": ["the victim is not preemptible (label fleetplane.dev/preemptible=<unset>, inference default false)"],
	},
	"exempt": {
		"input": victim({"pod": {"metadata": {"labels": {"fleetplane.dev/exempt": "true"}}}}),
		"reasons": ["the victim is labelled fleetplane.dev/exempt=true"],
	},
	"too young": {
		"input": victim({"running_seconds": 599}),
		"reasons": ["the victim has run 599s, less than the 600s minimum for training"],
	},
	"holds nothing": {
		"input": victim({"devices": 0, "team_held": 16}),
		"reasons": ["the victim holds no accelerators, so taking it back frees none"],
	},
	"victim team would fall below its share": {
		"input": victim({"team_held": 20}),
		"reasons": ["team research would fall below its deserved share 16 (holds 20, the victim and its gang hold 8)"],
	},
	"victim outside every team": {
		"input": victim({"pod": {"metadata": {"namespace": "default"}}}),
		"reasons": [`the victim's namespace "default" belongs to no team`],
	},
	"claimant outside every team": {
		"input": claimant({"pod": {"metadata": {"namespace": "default"}}}),
		"reasons": [`the claimant's namespace "default" belongs to no team`],
	},
}

test_denied[name] if {
	some name, case in deny_cases
	decide(case.input) == {"allow": false, "reasons": case.reasons}
}

problem_cases := {
	"no input": {"input": null, "reasons": ["input must be an object"]},
	"no victim": {
		"input": json.remove(base, ["victim"]),
		"reasons": ["input.victim must be an object"],
	},
	"no pool": {
		"input": json.remove(base, ["pool"]),
		"reasons": ["input.pool must be an object"],
	},
	"victim without a pod": {
		"input": json.remove(base, ["victim/pod"]),
		"reasons": ["input.victim.pod must be a Pod object with metadata"],
	},
	"share not a number": {
		"input": victim({"team_deserved": "16"}),
		"reasons": ["input.victim.team_deserved must be a number"],
	},
	"claimant share missing": {
		"input": json.remove(base, ["claimant/deserved"]),
		"reasons": ["input.claimant.deserved must be a number"],
	},
	"unknown type": {
		"input": victim({"workload_type": "mystery"}),
		"reasons": ["input.victim.workload_type must be a known workload type"],
	},
	"reclaimable missing": {
		"input": json.remove(base, ["victim/queue_reclaimable"]),
		"reasons": ["input.victim.queue_reclaimable must be a boolean"],
	},
}

test_input_problems_deny[name] if {
	some name, case in problem_cases
	decide(case.input) == {"allow": false, "reasons": case.reasons}
}

test_no_input_at_all_denies if {
	result := fairshare.decision with data.fleetplane.config as testing.config
	result.allow == false
}

test_failure_falls_back_to_the_check_name if {
	fairshare.failure("nonexistent") == "check nonexistent did not pass"
}
