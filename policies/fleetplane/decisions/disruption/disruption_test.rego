package fleetplane.decisions.disruption_test

import data.fleetplane.decisions.disruption
import data.fleetplane.testing

decide(request) := result if {
	result := disruption.decision with input as request with data.fleetplane.config as config
}

# The rendered document always carries the upgrade section's checkpoint age
# (default 900s); the shared fixture leaves it out.
config := object.union(testing.config, {"upgrade": {"checkpoint_max_age_seconds": 900}})

now := 1795003600

# Training (minimum runtime 600s in the test configuration), checkpoint max age
# 900s (the upgrade section's default).
running := {
	"pod": {"metadata": {"name": "train-0", "namespace": "ml-research", "labels": {"fleetplane.dev/workload-type": "training"}}},
	"workload_type": "training", "now": now, "running_seconds": 7200,
	"checkpoints": true, "last_checkpoint": now - 300, "gang": null,
}

given(patch) := object.union(running, patch)

test_checkpointed_pod_may_be_disrupted if {
	decide(running) == {
		"allow": true,
		"reasons": ["nothing protected: running since 2026-11-18T10:06:40Z (minimum runtime 600s), checkpoint fresh, no gang"],
		"recheck_at": (now - 300) + 901, # the checkpoint grows older than 900s
		"revision": null, # no data.fleetplane.revision loaded
	}
}

test_pod_without_checkpoints_past_min_runtime_may_be_disrupted if {
	decide(given({"checkpoints": false, "last_checkpoint": null})).allow == true
}

test_gang_checkpointed_may_be_disrupted if {
	answer := decide(given({"gang": {"name": "ml-research/pg", "members": 4, "last_checkpoint": now - 100}}))
	answer.allow == true
	answer.reasons == ["nothing protected: running since 2026-11-18T10:06:40Z (minimum runtime 600s), checkpoint fresh, gang ml-research/pg checkpointed within 900s"]
}

protect_cases := {
	"checkpoint too old": {"input": given({"last_checkpoint": now - 901}), "reasons": ["last checkpoint at 2026-11-18T11:51:39Z; older than 900s would lose work"]},
	"checkpoint never recorded": {"input": given({"last_checkpoint": null}), "reasons": ["last checkpoint never recorded; older than 900s would lose work"]},
	"checkpoint in the future": {"input": given({"last_checkpoint": now + 60}), "reasons": ["last checkpoint at 2026-11-18T12:07:40Z; older than 900s would lose work"]},
	"short of min runtime": {"input": given({"running_seconds": 599}), "reasons": ["running since 2026-11-18T11:56:41Z, protected until 2026-11-18T12:06:41Z by the 600s minimum runtime of training"]},
	"uncheckpointed gang": {
		"input": given({"gang": {"name": "ml-research/pg", "members": 2, "last_checkpoint": null}}),
		"reasons": ["member of gang ml-research/pg (2 pods): its oldest checkpoint never recorded, older than 900s; a split gang loses all of its work"],
	},
	"gang oldest checkpoint too old": {
		"input": given({"gang": {"name": "ml-research/pg", "members": 2, "last_checkpoint": now - 1000}}),
		"reasons": ["member of gang ml-research/pg (2 pods): its oldest checkpoint at 2026-11-18T11:50:00Z, older than 900s; a split gang loses all of its work"],
	},
	"both": {
		"input": given({"running_seconds": 10, "last_checkpoint": null}),
		"reasons": ["last checkpoint never recorded; older than 900s would lose work", "running since 2026-11-18T12:06:30Z, protected until 2026-11-18T12:16:30Z by the 600s minimum runtime of training"],
	},
}

test_protected[name] if {
	some name, case in protect_cases
	answer := decide(case.input)
	answer.allow == false
	answer.reasons == case.reasons
}

# The same facts a pass later (the clock moved on, the pod ran as long longer, no checkpoint
# came) give the same words: the controller rewrites a protection only when its reason
# changed, so words naming ages would cost a write and an Event per protected pod every pass.
test_min_runtime_reason_holds_across_passes if {
	first := decide(given({"running_seconds": 100}))
	second := decide(given({"now": now + 90, "running_seconds": 190}))
	first.allow == false
	first == second
	first.reasons == ["running since 2026-11-18T12:05:00Z, protected until 2026-11-18T12:15:00Z by the 600s minimum runtime of training"]
}

test_stale_gang_reason_holds_across_passes if {
	stale := {"name": "ml-research/pg", "members": 8, "last_checkpoint": now - 2000}
	first := decide(given({"gang": stale}))
	second := decide(given({"gang": stale, "now": now + 600, "running_seconds": 7800}))
	first.allow == false
	first == second
	first.reasons == ["member of gang ml-research/pg (8 pods): its oldest checkpoint at 2026-11-18T11:33:20Z, older than 900s; a split gang loses all of its work"]
}

test_allow_reason_holds_across_passes if {
	first := decide(running)
	second := decide(given({"now": now + 60, "running_seconds": 7260}))
	first.allow == true
	first == second
}

# A number OPA cannot format as a time is named as itself, still protecting.
test_unformattable_instant_is_named_as_itself if {
	answer := decide(given({"last_checkpoint": -100000000000000}))
	answer.allow == false
	answer.reasons == ["last checkpoint at -100000000000000 (epoch seconds); older than 900s would lose work"]
}

# A gang of one pod is a pod: its own checkpoint rule applies.
test_gang_of_one_is_a_pod if {
	decide(given({"gang": {"name": "ml-research/pg", "members": 1, "last_checkpoint": null}})).allow == true
}

# Missing or malformed input protects, never unprotects.
malformed := {
	"not an object": {"input": "x", "reason": "input must be an object"},
	"no pod": {"input": json.remove(running, ["pod"]), "reason": "input.pod must be a Pod object with metadata"},
	"no now": {"input": json.remove(running, ["now"]), "reason": "input.now must be a non-negative integer"},
	"no running": {"input": json.remove(running, ["running_seconds"]), "reason": "input.running_seconds must be a non-negative integer"},
	"unknown type": {"input": given({"workload_type": "mining"}), "reason": "input.workload_type must be a known workload type"},
	"no type": {"input": json.remove(running, ["workload_type"]), "reason": "input.workload_type must be a known workload type"},
	"checkpoints not boolean": {"input": given({"checkpoints": "yes"}), "reason": "input.checkpoints must be a boolean"},
	"no checkpoints flag": {"input": json.remove(running, ["checkpoints"]), "reason": "input.checkpoints must be a boolean"},
	"checkpoint text": {"input": given({"last_checkpoint": "recent"}), "reason": "input.last_checkpoint must be a number or null"},
	"no gang key": {"input": json.remove(running, ["gang"]), "reason": "input.gang must be null or {name, members, last_checkpoint}"},
	"gang without members": {"input": given({"gang": {"name": "ml-research/pg", "last_checkpoint": null}}), "reason": "input.gang must be null or {name, members, last_checkpoint}"},
	"pod without metadata": {"input": given({"pod": {"metadata": "train-0"}}), "reason": "input.pod must be a Pod object with metadata"},
	"now as text": {"input": given({"now": "1795003600"}), "reason": "input.now must be a non-negative integer"},
	"now with a fraction": {"input": given({"now": 1795003600.5}), "reason": "input.now must be a non-negative integer"},
	"negative running": {"input": given({"running_seconds": -1}), "reason": "input.running_seconds must be a non-negative integer"},
	"checkpoint a boolean": {"input": given({"last_checkpoint": true}), "reason": "input.last_checkpoint must be a number or null"},
	"gang as text": {"input": given({"gang": "ml-research/pg"}), "reason": "input.gang must be null or {name, members, last_checkpoint}"},
	"gang name empty": {"input": given({"gang": {"name": "", "members": 2, "last_checkpoint": null}}), "reason": "input.gang must be null or {name, members, last_checkpoint}"},
	"gang members a fraction": {"input": given({"gang": {"name": "ml-research/pg", "members": 2.5, "last_checkpoint": null}}), "reason": "input.gang must be null or {name, members, last_checkpoint}"},
	"gang checkpoint text": {"input": given({"gang": {"name": "ml-research/pg", "members": 2, "last_checkpoint": "recent"}}), "reason": "input.gang must be null or {name, members, last_checkpoint}"},
}

# Only the problems there are: a null checkpoint is no problem beside a malformed field.
test_malformed_input_names_only_its_problems if {
	decide(given({"checkpoints": "yes", "last_checkpoint": null})).reasons == ["input.checkpoints must be a boolean"]
}

# A workload type without a minimum runtime has none (0s).
test_type_without_min_runtime_has_none if {
	bare := object.union(config, {"workload_types": {"reserved-test-type": {"priority": 10}}})
	answer := disruption.decision with input as given({"workload_type": "reserved-test-type", "running_seconds": 0}) with data.fleetplane.config as bare
	answer.allow == true
	answer.reasons == ["nothing protected: running since 2026-11-18T12:06:40Z (minimum runtime 0s), checkpoint fresh, no gang"]
}

test_malformed_input_protects[name] if {
	some name, case in malformed
	answer := decide(case.input)
	answer.allow == false
	case.reason in answer.reasons
}

test_missing_max_age_protects if {
	answer := disruption.decision with input as running with data.fleetplane.config as testing.config
	answer.allow == false
	"data.fleetplane.config.upgrade.checkpoint_max_age_seconds must be a number" in answer.reasons
}

# Many pods in one request: each answer is the single decision on its input.
test_decisions_answer_each_pod_as_the_single_decision if {
	inputs := {
		"a": running,
		"b": given({"running_seconds": 60}),
		"c": given({"gang": {"name": "ml-research/pg", "members": 4, "last_checkpoint": null}}),
		"d": given({"now": -1}),
	}
	answers := disruption.decisions with input as {"pods": inputs} with data.fleetplane.config as config
	count(answers) == 4
	every key, one in inputs {
		answers[key] == decide(one)
	}
	answers.a.allow == true
	answers.b.allow == false
	answers.c.allow == false
	answers.d.allow == false
}

test_decisions_without_pods_answer_nothing if {
	disruption.decisions == {} with input as {} with data.fleetplane.config as config
	disruption.decisions == {} with input as {"pods": "all"} with data.fleetplane.config as config
}

# recheck_at is the first instant the same facts are answered otherwise: a second before it the
# answer is the one given now, at it the answer differs. The controller asks again about an
# unchanged pod only from then (controller/decide/disruption_memo.py).
at(case, instant) := given(object.union(case, {"now": instant, "running_seconds": case.running_seconds + (instant - now)}))

recheck_cases := {
	"minimum runtime ends": {"case": {"running_seconds": 599, "checkpoints": false, "last_checkpoint": null}, "turn": now + 1},
	"fresh checkpoint grows old": {"case": {"running_seconds": 7200}, "turn": (now - 300) + 901},
	"checkpoint stamped in the future arrives": {"case": {"running_seconds": 7200, "last_checkpoint": now + 60}, "turn": now + 60},
	"gang's oldest checkpoint grows old": {"case": {"running_seconds": 7200, "gang": {"name": "ml-research/pg", "members": 4, "last_checkpoint": now - 100}}, "turn": (now - 100) + 901},
	"the earlier of two": {"case": {"running_seconds": 500}, "turn": now + 100},
}

test_recheck_at_is_where_the_answer_turns[name] if {
	some name, c in recheck_cases
	answer := decide(given(c.case))
	answer.recheck_at == c.turn
	decide(at(c.case, c.turn - 1)).allow == answer.allow
	decide(at(c.case, c.turn)) != answer
}

# Where the clock alone changes nothing, there is no instant to ask again at.
test_no_recheck_where_the_clock_changes_nothing[name] if {
	some name, c in {
		"no checkpoints, past min runtime": {"checkpoints": false, "last_checkpoint": null},
		"stale checkpoint": {"last_checkpoint": now - 901},
		"stale gang": {"gang": {"name": "ml-research/pg", "members": 4, "last_checkpoint": null}},
	}
	decide(given(c)).recheck_at == null
}

test_malformed_input_has_no_recheck if {
	decide(given({"now": "soon", "running_seconds": 10})).recheck_at == null
}

# A fractional minimum runtime or checkpoint age turns at the first whole second past it.
test_fractional_thresholds_turn_at_whole_seconds if {
	frac := object.union(config, {"workload_types": {"training": {"min_runtime_seconds": 600.5}}, "upgrade": {"checkpoint_max_age_seconds": 900.5}})
	short := disruption.decision with input as given({"running_seconds": 599, "checkpoints": false, "last_checkpoint": null}) with data.fleetplane.config as frac
	short.recheck_at == now + 2
	fresh := disruption.decision with input as running with data.fleetplane.config as frac
	fresh.recheck_at == (now - 300) + 901
}

test_answer_names_the_loaded_revision if {
	answer := disruption.decision with input as running with data.fleetplane.config as config with data.fleetplane.revision as "4f2a9c0b1d3e5f67"
	answer.revision == "4f2a9c0b1d3e5f67"
	odd := disruption.decision with input as running with data.fleetplane.config as config with data.fleetplane.revision as 7
	odd.revision == null
}
