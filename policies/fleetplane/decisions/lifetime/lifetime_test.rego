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
	"unknown action": {"input": object.union(stop, {"action": "kill"}), "reasons": ["input.action must be one of orphan-reclaim, runtime-stop"]},
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
