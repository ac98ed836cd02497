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
