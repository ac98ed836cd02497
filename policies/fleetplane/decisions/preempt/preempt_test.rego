package fleetplane.decisions.preempt_test

import data.fleetplane.decisions.preempt
import data.fleetplane.testing

decide(request) := result if {
	result := preempt.decision with input as request with data.fleetplane.config as testing.config
}

pod(namespace, labels, limits) := {
	"metadata": {"name": "p", "namespace": namespace, "labels": labels},
	"spec": {"containers": [{"name": "main", "image": "nvcr.io/x", "resources": {"limits": limits}}]},
}

# Research training (priority 1000) against an analytics batch pod holding two
# GPUs; analytics is guaranteed 2 GPUs and uses 6.
base := {
	"preemptor": {
		"pod": pod("ml-research", {"fleetplane.dev/workload-type": "training"}, {"nvidia.com/gpu": "8"}),
		"workload_type": "training", "priority": 1000, "pending_seconds": 900,
	},
	"victim": {
		"pod": pod("analytics", {"fleetplane.dev/workload-type": "batch"}, {"nvidia.com/gpu": "2"}),
		"workload_type": "batch", "priority": 100, "running_seconds": 7200,
		"seconds_since_checkpoint": 300, "team_usage": {"nvidia.com/gpu": 6},
	},
	"now": 1795003600,
}

victim(patch) := object.union(base, {"victim": patch})

test_lower_priority_borrowing_batch_is_preempted if {
	decide(base) == {"allow": true, "reasons": [
		"preemptor priority 1000 > victim priority 100; victim batch is preemptible and has run 7200s (minimum 300s)",
		`team analytics keeps at least its guaranteed quota {"google.com/tpu":0,"nvidia.com/gpu":2} after losing {"nvidia.com/gpu":2} (usage {"nvidia.com/gpu":6})`,
	]}
}

allow_cases := {
	"team lands exactly on its guarantee": victim({"team_usage": {"nvidia.com/gpu": 4}}),
	"within one team priority alone decides": victim({"pod": {"metadata": {"namespace": "ml-research"}}, "team_usage": {"nvidia.com/gpu": 0}}),
	"preemptible label overrides the type": victim({"workload_type": "inference", "pod": {"metadata": {"labels": {"fleetplane.dev/preemptible": "true"}}}}),
	"run exactly the minimum": victim({"running_seconds": 300}),
	"mig devices count as gpus": victim({"pod": {"spec": {"containers": [{"name": "m", "image": "nvcr.io/x", "resources": {"limits": {"nvidia.com/mig-1g.10gb": "3"}}}]}}}),
}

test_allowed[name] if {
	some name, request in allow_cases
	decide(request).allow == true
}

test_same_team_reason if {
	"both workloads belong to team research" in decide(allow_cases["within one team priority alone decides"]).reasons
}

deny_cases := {
	"equal priority": {"input": victim({"priority": 1000}), "reasons": ["preemptor priority 1000 is not higher than victim priority 1000"]},
	"labelled not preemptible": {
		"input": victim({"pod": {"metadata": {"labels": {"fleetplane.dev/preemptible": "false"}}}}),
		"reasons": ["the victim is not preemptible (label fleetplane.dev/preemptible=false, batch default true)"],
	},
	"type not preemptible": {
		"input": victim({"workload_type": "inference"}),
		"reasons": ["the victim is not preemptible (label fleetplane.dev/preemptible=<unset>, inference default false)"],
	},
	"exempt": {"input": victim({"pod": {"metadata": {"labels": {"fleetplane.dev/exempt": "true"}}}}), "reasons": ["the victim is labelled fleetplane.dev/exempt=true"]},
	"too young": {"input": victim({"running_seconds": 299}), "reasons": ["the victim has run 299s, less than the 300s minimum for batch"]},
	"team would fall below its guarantee": {
		"input": victim({"team_usage": {"nvidia.com/gpu": 3}}),
		"reasons": [`team analytics would fall below its guaranteed quota {"google.com/tpu":0,"nvidia.com/gpu":2} (usage {"nvidia.com/gpu":3}, victim holds {"nvidia.com/gpu":2})`],
	},
	"usage of the family unknown": {
		"input": json.patch(base, [{"op": "replace", "path": "/victim/team_usage", "value": {"google.com/tpu": 8}}]),
		"reasons": [`team analytics would fall below its guaranteed quota {"google.com/tpu":0,"nvidia.com/gpu":2} (usage {"google.com/tpu":8}, victim holds {"nvidia.com/gpu":2})`],
	},
	"victim outside every team": {"input": victim({"pod": {"metadata": {"namespace": "default"}}}), "reasons": [`the victim's namespace "default" belongs to no team`]},
	"victim holds nothing": {
		"input": victim({"pod": {"spec": {"containers": [{"name": "c", "image": "nvcr.io/x"}]}}}),
		"reasons": ["the victim holds no accelerators, so preempting it frees none"],
	},
}

test_denied[name] if {
	some name, tc in deny_cases
	decide(tc.input) == {"allow": false, "reasons": tc.reasons}
}

malformed_cases := {
	"no input": {"input": null, "reasons": ["input must be an object"]},
	"no victim": {"input": object.remove(base, ["victim"]), "reasons": ["input.victim must be an object"]},
	"priority as text": {"input": victim({"priority": "low"}), "reasons": ["input.victim.priority must be a number"]},
	"preemptor without pod": {"input": json.remove(base, ["preemptor/pod"]), "reasons": ["input.preemptor.pod must be a Pod object with metadata"]},
	"unknown type": {"input": victim({"workload_type": "gaming"}), "reasons": ["input.victim.workload_type must be a known workload type"]},
	"running time missing": {"input": json.remove(base, ["victim/running_seconds"]), "reasons": ["input.victim.running_seconds must be a number"]},
	"usage not numbers": {"input": victim({"team_usage": {"nvidia.com/gpu": "6"}}), "reasons": ["input.victim.team_usage must be a map of resource to a number"]},
}

test_malformed_input_is_denied_naming_the_field[name] if {
	some name, tc in malformed_cases
	decide(tc.input) == {"allow": false, "reasons": tc.reasons}
}

test_unexplained_check_has_a_generic_reason if {
	preempt.failure("unknown") == "check unknown did not pass"
}
