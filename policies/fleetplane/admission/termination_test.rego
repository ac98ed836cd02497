package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# Issue 33: an accelerator pod keeps its devices through its grace period
# (and the preStop hooks that run in it) whenever the platform stops it.
grace_cases := {
	"kubernetes' default": [testing.pod(testing.training), set()],
	"a short grace": [testing.pod(testing.with_spec(testing.training, {"terminationGracePeriodSeconds": 60})), set()],
	"at the bound": [testing.pod(testing.with_spec(testing.training, {"terminationGracePeriodSeconds": 120})), set()],
	"none at all": [testing.pod(testing.with_spec(testing.training, {"terminationGracePeriodSeconds": 0})), set()],
	"negative (the api server makes it 1 s)": [testing.pod(testing.with_spec(testing.training, {"terminationGracePeriodSeconds": -1})), set()],
	"a preStop hook inside a short grace": [
		testing.pod(testing.replace_spec(testing.training, "containers", [object.union(testing.container("main", {"nvidia.com/gpu": "8"}), {"lifecycle": {"preStop": {"sleep": {"seconds": 20}}}})])),
		set(),
	],
	"over the bound": [testing.pod(testing.with_spec(testing.training, {"terminationGracePeriodSeconds": 121})), {"termination-grace"}],
	"a day": [testing.pod(testing.with_spec(testing.training, {"terminationGracePeriodSeconds": 86400})), {"termination-grace"}],
	"not a number": [testing.pod(testing.with_spec(testing.training, {"terminationGracePeriodSeconds": "60"})), {"termination-grace"}],
	"a fraction": [testing.pod(testing.with_spec(testing.training, {"terminationGracePeriodSeconds": 1.5})), {"termination-grace"}],
	"in a deployment's template": [testing.deployment(testing.with_spec(testing.inference, {"terminationGracePeriodSeconds": 3600}), 1), {"termination-grace"}],
	"in a job's template": [testing.job(testing.with_spec(testing.training, {"terminationGracePeriodSeconds": 3600}), {"backoffLimit": 0}), {"termination-grace"}],
	"a cpu pod may take its time": [testing.pod(testing.with_spec(testing.cpu, {"terminationGracePeriodSeconds": 3600})), set()],
}

test_termination_grace[name] if {
	some name, [rev, want] in grace_cases
	{r | some r in rules(rev); r == "termination-grace"} == want
}

test_termination_grace_leaves_the_other_rules if {
	rules(grace_cases["kubernetes' default"][0]) == set()
	rules(grace_cases["over the bound"][0]) == {"termination-grace"}
}

test_termination_grace_message_says_what_to_set if {
	some_message(grace_cases["over the bound"][0], "termination-grace: pod sets terminationGracePeriodSeconds 121; a pod keeps its accelerators through its grace period (and the preStop hooks that run in it) whenever it is stopped, so set it to a whole number of seconds up to 120")
	some_message(grace_cases["not a number"][0], `terminationGracePeriodSeconds "60"`)
}

test_termination_grace_is_judged_on_template_updates if {
	old := testing.deployment(testing.inference, 1).request.object
	rev := testing.as_update(testing.deployment(testing.with_spec(testing.inference, {"terminationGracePeriodSeconds": 3600}), 1), old)
	"termination-grace" in rules(rev)
}

# The grace is priced: each run is priced up to its end plus its grace.
test_grace_is_priced[name] if {
	some name, [tmpl, want] in {
		"the default grace": [testing.training, eight_h100_day],
		"no grace": [testing.with_spec(testing.training, {"terminationGracePeriodSeconds": 0}), ((8 * 12.29) * 86400) / 3600],
		"the bound": [testing.with_spec(testing.training, {"terminationGracePeriodSeconds": 120}), ((8 * 12.29) * (86400 + 120)) / 3600],
		"a deadline and its grace": [
			testing.with_spec(testing.training, {"activeDeadlineSeconds": 3600, "terminationGracePeriodSeconds": 90}),
			((8 * 12.29) * (3600 + 90)) / 3600,
		],
	}
	near(with_spend(testing.pod(tmpl), {}, "estimate_usd"), want)
}

test_grace_is_priced_for_every_run_and_under_a_job_deadline if {
	two_runs := testing.job(testing.with_spec(testing.training, {"activeDeadlineSeconds": 3600, "terminationGracePeriodSeconds": 90}), {"backoffLimit": 1})
	near(with_spend(two_runs, {}, "estimate_usd"), (2 * ((8 * 12.29) * (3600 + 90))) / 3600)
	bounded := testing.job(testing.with_spec(testing.training, {"terminationGracePeriodSeconds": 90}), {"activeDeadlineSeconds": 600})
	near(with_spend(bounded, {}, "estimate_usd"), ((8 * 12.29) * (600 + 90)) / 3600)
}

test_priced_grace if {
	admission.priced_grace({}) == 30
	admission.priced_grace({"terminationGracePeriodSeconds": 0}) == 0
	admission.priced_grace({"terminationGracePeriodSeconds": -5}) == 1
	admission.priced_grace({"terminationGracePeriodSeconds": "60"}) == 120
	admission.with_grace(null, 30) == null
	admission.with_grace(60, 30) == 90
}

# fast.rego writes the bound as a literal (a constant rule costs OPA an
# evaluation per review): it must stay the policy's.
test_fast_path_grace_literal_is_the_bound if {
	admission.max_termination_grace_seconds == 120
	admission.default_termination_grace_seconds == 30
}

# A liveness or startup probe's own grace replaces the pod's when the kubelet
# kills a container whose probe failed: bounded the same way.
probe_grace_cases := {
	"a probe without its own grace": [probe_pod("livenessProbe", {"exec": {"command": ["true"]}}), set()],
	"a liveness probe's short grace": [probe_pod("livenessProbe", {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 60}), set()],
	"a startup probe at the bound": [probe_pod("startupProbe", {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 120}), set()],
	"a liveness probe over the bound": [probe_pod("livenessProbe", {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 3600}), {"termination-grace"}],
	"a startup probe over the bound": [probe_pod("startupProbe", {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": 86400}), {"termination-grace"}],
	"a probe's grace that is not a number": [probe_pod("livenessProbe", {"exec": {"command": ["true"]}, "terminationGracePeriodSeconds": "60"}), {"termination-grace"}],
}

probe_pod(probe, spec) := testing.pod(testing.replace_spec(testing.training, "containers", [object.union(testing.container("main", {"nvidia.com/gpu": "8"}), {probe: spec})]))

test_probe_grace[name] if {
	some name, [rev, want] in probe_grace_cases
	{r | some r in rules(rev); r == "termination-grace"} == want
}

test_probe_grace_message_names_the_probe if {
	some_message(probe_grace_cases["a liveness probe over the bound"][0], `pod containers "main" livenessProbe sets terminationGracePeriodSeconds 3600`)
}

test_probe_grace_is_left_to_the_full_rules if {
	not admission.fast_response with input as probe_grace_cases["a liveness probe over the bound"][0]
}
