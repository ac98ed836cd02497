package fleetplane.decisions.lifetime_test

import data.fleetplane.decisions.lifetime
import data.fleetplane.testing

decide(request) := result if {
	result := lifetime.decision with input as request with data.fleetplane.config as testing.config
}

now := 1795003600

pod := {"metadata": {"name": "train-0", "namespace": "ml-research", "labels": {"fleetplane.dev/workload-type": "training"}}}

with_pod(patch) := object.union(stop, {"pod": {"metadata": patch}})

with_runtime(patch) := object.union(stop, {"runtime": patch})

# Training (maximum 86400s, grace 1800s) ran 90000s, warned 2000s ago; its
# checkpoint window closed 100s ago.
stop := {
	"action": "runtime-stop", "pod": pod, "workload_type": "training", "now": now,
	"runtime": {"running_seconds": 90000, "warned_at": now - 2000, "stop_at": now - 100},
}

test_past_max_runtime_warned_and_checkpointed_is_stopped if {
	decide(stop) == {"allow": true, "reasons": ["ran 90000s, past the 86400s maximum of training; warned at 1795001600, grace 1800s; checkpoint window over at 1795003500"]}
}

runtime_allow_cases := {
	"grace exactly over": with_runtime({"warned_at": now - 1800, "stop_at": now}),
	"stop deadline passed": with_pod({"annotations": {"fleetplane.dev/stop-deadline": "1795003000"}}),
	"notebook": object.union(stop, {"workload_type": "notebook", "pod": {"metadata": {"labels": {"fleetplane.dev/workload-type": "notebook"}}}}),
}

test_runtime_allowed[name] if {
	some name, request in runtime_allow_cases
	decide(request).allow == true
}

runtime_deny_cases := {
	"exempt": {"input": with_pod({"labels": {"fleetplane.dev/exempt": "true"}}), "reasons": ["the pod is labelled fleetplane.dev/exempt=true"]},
	"type label disagrees": {
		"input": with_pod({"labels": {"fleetplane.dev/workload-type": "batch"}}),
		"reasons": [`the pod's fleetplane.dev/workload-type label is "batch" but the request says "training"`],
	},
	"no type label": {
		"input": json.remove(stop, ["pod/metadata/labels"]),
		"reasons": [`the pod's fleetplane.dev/workload-type label is null but the request says "training"`],
	},
	"within its maximum": {"input": with_runtime({"running_seconds": 86400}), "reasons": ["running 86400s is not past the 86400s maximum of training"]},
	"never warned": {"input": with_runtime({"warned_at": null}), "reasons": ["no runtime warning has been issued yet"]},
	"grace not over": {
		"input": with_runtime({"warned_at": now - 600, "stop_at": now - 100}),
		"reasons": [
			"the grace period has not elapsed: warned at 1795003000, grace is 1800s, now is 1795003600",
			"the next checkpoint window ends at 1795003500 (not before the grace ends at 1795004800); now is 1795003600",
		],
	},
	"warned in the future": {
		"input": with_runtime({"warned_at": now + 60, "stop_at": now + 1860}),
		"reasons": [
			"the grace period has not elapsed: warned at 1795003660, grace is 1800s, now is 1795003600",
			"the next checkpoint window ends at 1795005460 (not before the grace ends at 1795005460); now is 1795003600",
		],
	},
	"checkpoint window still open": {
		"input": with_runtime({"stop_at": now + 900}),
		"reasons": ["the next checkpoint window ends at 1795004500 (not before the grace ends at 1795003400); now is 1795003600"],
	},
	"stop deadline ahead": {
		"input": with_pod({"annotations": {"fleetplane.dev/stop-deadline": "1795009999"}}),
		"reasons": ["annotation fleetplane.dev/stop-deadline=1795009999 is not a past epoch time"],
	},
	"stop deadline malformed": {
		"input": with_pod({"annotations": {"fleetplane.dev/stop-deadline": "soon"}}),
		"reasons": ["annotation fleetplane.dev/stop-deadline=soon is not a past epoch time"],
	},
}

test_runtime_denied[name] if {
	some name, tc in runtime_deny_cases
	decide(tc.input) == {"allow": false, "reasons": tc.reasons}
}

test_type_without_maximum_is_never_stopped if {
	unbounded := object.union(testing.config, {"workload_types": {"training": {"default_max_runtime_seconds": null}}})
	lifetime.decision == {"allow": false, "reasons": ["workload type training has no maximum runtime (default_max_runtime_seconds is null)"]} with input as stop
		with data.fleetplane.config as unbounded
}

test_no_lifetime_section_never_allows if {
	not lifetime.decision.allow with input as stop with data.fleetplane.config as object.remove(testing.config, ["lifetime"])
}

malformed_cases := {
	"no input": {"input": null, "reasons": ["input must be an object"]},
	"no action": {"input": object.remove(stop, ["action"]), "reasons": ["input.action must be one of orphan-reclaim, runtime-stop, straggler-restart"]},
	"unknown action": {"input": object.union(stop, {"action": "kill"}), "reasons": ["input.action must be one of orphan-reclaim, runtime-stop, straggler-restart"]},
	"no pod": {"input": object.remove(stop, ["pod"]), "reasons": ["input.pod must be a Pod object with metadata"]},
	"now as text": {"input": object.union(stop, {"now": "now"}), "reasons": ["input.now must be a non-negative integer"]},
	"no runtime": {"input": object.remove(stop, ["runtime"]), "reasons": ["input.runtime must be an object"]},
	"running as text": {"input": with_runtime({"running_seconds": "long"}), "reasons": ["input.runtime.running_seconds must be a number"]},
	"stop_at missing": {"input": json.remove(stop, ["runtime/stop_at"]), "reasons": ["input.runtime.stop_at must be a number"]},
	"warned_at missing": {"input": json.remove(stop, ["runtime/warned_at"]), "reasons": ["input.runtime.warned_at must be a number or null"]},
	"unknown type": {"input": object.union(stop, {"workload_type": "gaming"}), "reasons": ["input.workload_type must be a known workload type"]},
}

test_malformed_input_is_denied_naming_the_field[name] if {
	some name, tc in malformed_cases
	decide(tc.input) == {"allow": false, "reasons": tc.reasons}
}

test_unexplained_check_has_a_generic_reason if {
	lifetime.failure("unknown") == "check unknown did not pass"
}

# ------------------------------------------------------------- orphan-reclaim

gpu_pod := {
	"metadata": {"name": "run-0", "namespace": "ml-research", "labels": {"fleetplane.dev/workload-type": "training"}},
	"spec": {"nodeName": "h100-0", "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
	"status": {"phase": "Running"},
}

orphan := {
	"action": "orphan-reclaim", "pod": gpu_pod, "now": now,
	"orphan": {"reason": "owner-gone", "owner": "Job ml-research/run", "found_at": now - 300},
}

with_orphan(patch) := object.union(orphan, {"orphan": patch})

test_orphan_past_the_grace_is_reclaimed if {
	decide(orphan) == {"allow": true, "reasons": ["orphaned (owner-gone, Job ml-research/run), found at 1795003300; grace 300s"]}
	decide(with_orphan({"reason": "job-failed"})).allow
}

orphan_deny_cases := {
	"another reason": {"input": with_orphan({"reason": "looks-idle"}), "reasons": [`orphan reason "looks-idle" is neither owner-gone nor job-failed`]},
	"no reason": {"input": json.remove(orphan, ["orphan/reason"]), "reasons": ["orphan reason null is neither owner-gone nor job-failed"]},
	"not found before": {"input": with_orphan({"found_at": null}), "reasons": ["the pod has not been found orphaned before"]},
	"grace not over": {"input": with_orphan({"found_at": now - 299}), "reasons": ["found orphaned at 1795003301; the 300s grace has not passed (now 1795003600)"]},
	"found in the future": {"input": with_orphan({"found_at": now + 10}), "reasons": ["found orphaned at 1795003610; the 300s grace has not passed (now 1795003600)"]},
	"exempt": {
		"input": object.union(orphan, {"pod": {"metadata": {"labels": {"fleetplane.dev/exempt": "true"}}}}),
		"reasons": ["the pod is labelled fleetplane.dev/exempt=true"],
	},
	"finished": {
		"input": object.union(orphan, {"pod": {"status": {"phase": "Failed"}}}),
		"reasons": ["the pod holds no accelerators (not on a node, finished, or requesting none)"],
	},
	"not on a node": {
		"input": json.remove(orphan, ["pod/spec/nodeName"]),
		"reasons": ["the pod holds no accelerators (not on a node, finished, or requesting none)"],
	},
	"no accelerators": {
		"input": json.remove(orphan, ["pod/spec/containers/0/resources"]),
		"reasons": ["the pod holds no accelerators (not on a node, finished, or requesting none)"],
	},
}

test_orphan_denied[name] if {
	some name, tc in orphan_deny_cases
	decide(tc.input) == {"allow": false, "reasons": tc.reasons}
}

test_orphan_malformed_input_names_the_field if {
	decide(object.remove(orphan, ["orphan"])) == {"allow": false, "reasons": ["input.orphan must be an object"]}
	decide(with_orphan({"found_at": "earlier"})) == {"allow": false, "reasons": ["input.orphan.found_at must be a number or null"]}
}

# ---------------------------------------------------------- straggler-restart

# A Volcano Job's worker at 1% while its two peers average 80% and 90%
# (testing.config: line 5%, busy 50%), reported 600s ago, opted in.
worker := {
	"metadata": {
		"name": "vj-worker-1", "namespace": "ml-research",
		"labels": {"fleetplane.dev/workload-type": "training", "fleetplane.dev/straggler-action": "restart"},
		"ownerReferences": [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "name": "vj", "uid": "u", "controller": true}],
	},
	"spec": {"nodeName": "h100-1", "containers": [{"name": "main", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]},
	"status": {"phase": "Running"},
}

straggling := {
	"action": "straggler-restart", "pod": worker, "now": now,
	"straggler": {
		"gang": "ml-research/vj", "window_seconds": 1800, "peak_util_percent": 1, "samples": 120,
		"peers": [{"pod": "ml-research/vj-worker-0", "mean_util_percent": 80}, {"pod": "ml-research/vj-worker-2", "mean_util_percent": 90}],
		"reported_at": now - 600,
	},
}

with_straggler(patch) := object.union(straggling, {"straggler": patch})

test_reported_straggler_opted_in_is_restarted if {
	decide(straggling) == {"allow": true, "reasons": ["straggler of ml-research/vj: peak 1% (line 5%), 2 peer(s) at least 50% busy; reported at 1795003000"]}
	decide(with_straggler({"peak_util_percent": 5, "peers": [{"pod": "p", "mean_util_percent": 50}]})).allow
}

straggler_deny_cases := {
	"not opted in": {
		"input": json.remove(straggling, ["pod/metadata/labels/fleetplane.dev~1straggler-action"]),
		"reasons": ["acting on a straggler needs the pod's label fleetplane.dev/straggler-action=restart"],
	},
	"another action asked for": {
		"input": object.union(straggling, {"pod": {"metadata": {"labels": {"fleetplane.dev/straggler-action": "report"}}}}),
		"reasons": ["acting on a straggler needs the pod's label fleetplane.dev/straggler-action=restart"],
	},
	"exempt": {
		"input": object.union(straggling, {"pod": {"metadata": {"labels": {"fleetplane.dev/exempt": "true"}}}}),
		"reasons": ["the pod is labelled fleetplane.dev/exempt=true"],
	},
	"not idle enough": {"input": with_straggler({"peak_util_percent": 5.5}), "reasons": ["peak utilisation 5.5% is above the straggler line of 5%"]},
	"a peer not busy": {
		"input": with_straggler({"peers": [{"pod": "ml-research/vj-worker-0", "mean_util_percent": 49}]}),
		"reasons": [`not every peer averaged at least the busy line of 50%: [{"mean_util_percent":49,"pod":"ml-research/vj-worker-0"}]`],
	},
	"no peers": {"input": with_straggler({"peers": []}), "reasons": ["not every peer averaged at least the busy line of 50%: []"]},
	"never reported": {"input": with_straggler({"reported_at": null}), "reasons": ["the straggler has not been reported on an earlier pass"]},
	"reported in this pass": {"input": with_straggler({"reported_at": now}), "reasons": ["the straggler has not been reported on an earlier pass"]},
	"bare pod": {
		"input": json.remove(straggling, ["pod/metadata/ownerReferences"]),
		"reasons": ["the pod has no controller to start it again (a bare pod is only reported)"],
	},
	"not a controller reference": {
		"input": object.union(straggling, {"pod": {"metadata": {"ownerReferences": [{"kind": "Job", "name": "vj", "controller": false}]}}}),
		"reasons": ["the pod has no controller to start it again (a bare pod is only reported)"],
	},
	"finished": {
		"input": object.union(straggling, {"pod": {"status": {"phase": "Succeeded"}}}),
		"reasons": ["the pod holds no accelerators (not on a node, finished, or requesting none)"],
	},
}

test_straggler_denied[name] if {
	some name, tc in straggler_deny_cases
	decide(tc.input) == {"allow": false, "reasons": tc.reasons}
}

straggler_malformed_cases := {
	"no straggler": {"input": object.remove(straggling, ["straggler"]), "reasons": ["input.straggler must be an object"]},
	"peak missing": {"input": json.remove(straggling, ["straggler/peak_util_percent"]), "reasons": ["input.straggler.peak_util_percent must be a number"]},
	"peers not a list": {"input": with_straggler({"peers": "all busy"}), "reasons": ["input.straggler.peers must be an array of {pod, mean_util_percent}"]},
	"peer without a mean": {"input": with_straggler({"peers": [{"pod": "p"}]}), "reasons": ["input.straggler.peers must be an array of {pod, mean_util_percent}"]},
	"reported_at as text": {"input": with_straggler({"reported_at": "earlier"}), "reasons": ["input.straggler.reported_at must be a number or null"]},
}

test_straggler_malformed_input_names_the_field[name] if {
	some name, tc in straggler_malformed_cases
	decide(tc.input) == {"allow": false, "reasons": tc.reasons}
}

test_straggler_without_lifetime_section_never_allows if {
	not lifetime.decision.allow with input as straggling with data.fleetplane.config as object.remove(testing.config, ["lifetime"])
}
