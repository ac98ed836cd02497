package fleetplane.decisions.reclaim_test

import data.fleetplane.decisions.reclaim
import data.fleetplane.testing

decide(request) := result if {
	result := reclaim.decision with input as request with data.fleetplane.config as testing.config
}

now := 1795003600

# An idle notebook (window 1800s, grace 900s, threshold 5%) warned 1000s ago.
idle_notebook := {
	"pod": {"metadata": {"name": "nb", "namespace": "ml-research", "labels": {"fleetplane.dev/workload-type": "notebook"}}},
	"workload_type": "notebook",
	"idle": {
		"window_seconds": 3600, "samples": 60, "expected_samples": 60,
		"max_util_percent": 0.0, "max_engine_active": 0.0, "max_fb_used_mib": 512,
		"warned_at": now - 1000, "now": now,
	},
}

with_idle(patch) := object.union(idle_notebook, {"idle": patch})

with_pod(patch) := object.union(idle_notebook, {"pod": {"metadata": patch}})

test_idle_warned_notebook_is_reclaimed if {
	decide(idle_notebook) == {"allow": true, "reasons": [
		"idle for 3600s (needs 1800s) at peak 0% utilisation (threshold 5%), 60 of 60 samples",
		"warned 1000s ago, inside the idle window; grace is 900s",
	]}
}

allow_cases := {
	"utilisation at the threshold": with_idle({"max_util_percent": 5}),
	"engine activity not reported": with_idle({"max_engine_active": null}),
	"framebuffer not reported": with_idle({"max_fb_used_mib": null}),
	"window exactly the configured one": with_idle({"window_seconds": 1800}),
	"grace exactly elapsed": with_idle({"warned_at": now - 900}),
	"reclaim deadline passed": with_pod({"annotations": {"fleetplane.dev/reclaim-deadline": "1795003000"}}),
	"pod without a type label": json.remove(idle_notebook, ["pod/metadata/labels"]),
	"training": object.union(with_idle({"warned_at": now - 1800}), {"workload_type": "training", "pod": {"metadata": {"labels": {"fleetplane.dev/workload-type": "training"}}}}),
}

test_allowed[name] if {
	some name, request in allow_cases
	decide(request).allow == true
}

deny_cases := {
	"inference is never reclaimed": {
		"input": object.union(idle_notebook, {"workload_type": "inference", "pod": {"metadata": {"labels": {"fleetplane.dev/workload-type": "inference"}}}}),
		"reasons": ["workload type inference is never reclaimed (no idle policy)"],
	},
	"exempt pod": {"input": with_pod({"labels": {"fleetplane.dev/exempt": "true"}}), "reasons": ["the pod is labelled fleetplane.dev/exempt=true"]},
	"type label disagrees": {
		"input": with_pod({"labels": {"fleetplane.dev/workload-type": "training"}}),
		"reasons": [`the pod's fleetplane.dev/workload-type label is "training" but the request says "notebook"`],
	},
	"window too short": {"input": with_idle({"window_seconds": 1200}), "reasons": ["idle evidence covers 1200s, less than the 1800s window notebook requires"]},
	"samples missing": {"input": with_idle({"samples": 59}), "reasons": ["idle evidence is incomplete: 59 of 60 expected samples"]},
	"no samples expected": {"input": with_idle({"samples": 0, "expected_samples": 0}), "reasons": ["idle evidence is incomplete: 0 of 0 expected samples"]},
	"busy": {"input": with_idle({"max_util_percent": 5.5}), "reasons": ["peak utilisation 5.5% is above the 5% idle threshold"]},
	"engine busy": {"input": with_idle({"max_engine_active": 0.2}), "reasons": ["peak engine activity 0.2 is above the 5% idle threshold"]},
	"never warned": {"input": with_idle({"warned_at": null}), "reasons": ["no idle warning has been issued yet"]},
	"warned in the future": {
		"input": with_idle({"warned_at": now + 60}),
		"reasons": [
			"the grace period has not elapsed: warned -60s ago, grace is 900s",
			"the warning at 1795003660 is not inside the idle window (1795000000..1795003600), so the pod may have been busy since; warn again",
		],
	},
	"warned before the window": {
		"input": with_idle({"warned_at": now - 4000}),
		"reasons": ["the warning at 1794999600 is not inside the idle window (1795000000..1795003600), so the pod may have been busy since; warn again"],
	},
	"grace not elapsed": {"input": with_idle({"warned_at": now - 100}), "reasons": ["the grace period has not elapsed: warned 100s ago, grace is 900s"]},
	"reclaim deadline ahead": {
		"input": with_pod({"annotations": {"fleetplane.dev/reclaim-deadline": "1795009999"}}),
		"reasons": ["annotation fleetplane.dev/reclaim-deadline=1795009999 is not a past epoch time"],
	},
	"reclaim deadline malformed": {
		"input": with_pod({"annotations": {"fleetplane.dev/reclaim-deadline": "soon"}}),
		"reasons": ["annotation fleetplane.dev/reclaim-deadline=soon is not a past epoch time"],
	},
}

test_denied[name] if {
	some name, tc in deny_cases
	decide(tc.input) == {"allow": false, "reasons": tc.reasons}
}

malformed_cases := {
	"no input": {"input": null, "reasons": ["input.idle must be an object", "input.pod must be a Pod object with metadata", "input.workload_type must be a string"]},
	"no idle": {"input": object.remove(idle_notebook, ["idle"]), "reasons": ["input.idle must be an object"]},
	"sample count as a string": {"input": with_idle({"samples": "60"}), "reasons": ["input.idle.samples must be a number"]},
	"now missing": {"input": json.remove(idle_notebook, ["idle/now"]), "reasons": ["input.idle.now must be a number"]},
	"engine activity missing": {"input": json.remove(idle_notebook, ["idle/max_engine_active"]), "reasons": ["input.idle.max_engine_active must be a number or null"]},
	"warning as text": {"input": with_idle({"warned_at": "yesterday"}), "reasons": ["input.idle.warned_at must be a number or null"]},
	"no pod": {"input": object.remove(idle_notebook, ["pod"]), "reasons": ["input.pod must be a Pod object with metadata"]},
	"unknown type": {"input": object.union(idle_notebook, {"workload_type": "gaming"}), "reasons": [`input.workload_type "gaming" is not a known workload type`]},
}

test_malformed_input_is_denied_naming_the_field[name] if {
	some name, tc in malformed_cases
	decide(tc.input) == {"allow": false, "reasons": tc.reasons}
}

test_unexplained_check_has_a_generic_reason if {
	reclaim.failure("unknown") == "check unknown did not pass"
}
