package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# Issue 33: preemptors whose placement constraints the controller's
# preemption model cannot reason about.
pod_term := {"labelSelector": {"matchLabels": {"app": "trainer"}}, "topologyKey": "kubernetes.io/hostname"}

spread(when) := {"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone", "whenUnsatisfiable": when, "labelSelector": {"matchLabels": {"app": "trainer"}}}

placed(tmpl, extra) := testing.pod(testing.with_spec(tmpl, extra))

placement_cases := {
	"no constraints": [placed(testing.training, {}), set()],
	"preferred pod anti-affinity": [placed(testing.training, {"affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 100, "podAffinityTerm": pod_term}]}}}), set()],
	"a spread that schedules anyway": [placed(testing.training, {"topologySpreadConstraints": [spread("ScheduleAnyway")]}), set()],
	"required pod anti-affinity": [placed(testing.training, {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [pod_term]}}}), {"unmodellable-placement"}],
	"required pod affinity": [placed(testing.training, {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [pod_term]}}}), {"unmodellable-placement"}],
	"a spread that refuses to schedule": [placed(testing.training, {"topologySpreadConstraints": [spread("DoNotSchedule")]}), {"unmodellable-placement"}],
	"a spread that says nothing": [placed(testing.training, {"topologySpreadConstraints": [json.remove(spread("x"), ["whenUnsatisfiable"])]}), {"unmodellable-placement"}],
	"a cpu pod with required anti-affinity": [placed(testing.cpu, {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [pod_term]}}}), set()],
	"a cpu pod with a strict spread": [placed(testing.cpu, {"topologySpreadConstraints": [spread("DoNotSchedule")]}), set()],
	"a deployment of gpu pods with a strict spread": [testing.deployment(testing.with_spec(testing.inference, {"topologySpreadConstraints": [spread("DoNotSchedule")]}), 2), {"unmodellable-placement"}],
}

test_unmodellable_placement[name] if {
	some name, [rev, want] in placement_cases
	{r | some r in rules(rev); r == "unmodellable-placement"} == want
}

test_unmodellable_placement_message_says_what_to_change if {
	some_message(placement_cases["a spread that refuses to schedule"][0], "unmodellable-placement: pod asks for accelerators with a topology spread over topology.kubernetes.io/zone with whenUnsatisfiable DoNotSchedule;")
	some_message(placement_cases["required pod anti-affinity"][0], "state it as a preference (preferredDuringSchedulingIgnoredDuringExecution, or whenUnsatisfiable: ScheduleAnyway)")
}

test_unmodellable_placement_is_left_to_the_full_rules if {
	not admission.fast_response with input as placement_cases["required pod affinity"][0]
		with data.fleetplane.config as testing.config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

test_unmodellable_placement_is_not_judged_on_a_pod_update if {
	rev := placement_cases["required pod anti-affinity"][0]
	update := testing.as_update(rev, rev.request.object)
	not "unmodellable-placement" in rules(update)
}

# Required pod affinity where the fleet allows it for the workload type (the
# fixture allows it for inference only).
required_affinity := {"affinity": {"podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [pod_term]}}}

allowed_affinity_cases := {
	"inference beside its cache": [placed(testing.inference, required_affinity), set()],
	"a deployment of inference pods beside their cache": [testing.deployment(testing.with_spec(testing.inference, required_affinity), 2), set()],
	"training with required pod affinity": [placed(testing.training, required_affinity), {"unmodellable-placement"}],
	"inference with required anti-affinity": [placed(testing.inference, {"affinity": {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [pod_term]}}}), {"unmodellable-placement"}],
	"inference with a strict spread": [placed(testing.inference, {"topologySpreadConstraints": [spread("DoNotSchedule")]}), {"unmodellable-placement"}],
}

test_required_pod_affinity_where_the_type_allows_it[name] if {
	some name, [rev, want] in allowed_affinity_cases
	{r | some r in rules(rev); r == "unmodellable-placement"} == want
}

test_required_pod_affinity_is_refused_by_default if {
	# a configuration without the key (written before it existed) allows nothing
	rev := allowed_affinity_cases["inference beside its cache"][0]
	older := json.remove(testing.config, ["workload_types/inference/allow_required_pod_affinity"])
	"unmodellable-placement" in rules_with(rev, older)
	off := json.patch(testing.config, [{"op": "replace", "path": "/workload_types/inference/allow_required_pod_affinity", "value": false}])
	"unmodellable-placement" in rules_with(rev, off)
	not "unmodellable-placement" in rules_with(rev, testing.config)
}

rules_with(rev, config) := {split(m, ":")[0] |
	some m in admission.deny with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

test_the_refusal_names_the_setting_that_allows_it if {
	some_message(allowed_affinity_cases["training with required pod affinity"][0], "or use a workload type whose configuration allows required pod affinity (workload_types.<type>.allow_required_pod_affinity)")
}
