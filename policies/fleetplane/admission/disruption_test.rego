package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# Issue 33: a disruption budget that leaves no eviction of pods that may
# hold accelerators forbids the controller's own evictions.
pdb(spec) := testing.of_kind("policy", "v1", "PodDisruptionBudget", {
	"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
	"metadata": {"name": "hold", "namespace": "ml-research"},
	"spec": spec,
})

trainers := {"matchLabels": {"app": "trainer"}}

cpu_only := {"matchLabels": {"app": "web"}, "matchExpressions": [{"key": "fleetplane.dev/workload-type", "operator": "DoesNotExist"}]}

pdb_cases := {
	"maxUnavailable 1": [{"selector": trainers, "maxUnavailable": 1}, true],
	"maxUnavailable 10%": [{"selector": trainers, "maxUnavailable": "10%"}, true],
	"minAvailable 1": [{"selector": trainers, "minAvailable": 1}, true],
	"minAvailable 50%": [{"selector": trainers, "minAvailable": "50%"}, true],
	"neither": [{"selector": trainers}, true],
	"maxUnavailable 0": [{"selector": trainers, "maxUnavailable": 0}, false],
	"maxUnavailable 0%": [{"selector": trainers, "maxUnavailable": "0%"}, false],
	"minAvailable 100%": [{"selector": trainers, "minAvailable": "100%"}, false],
	"every pod of the namespace, maxUnavailable 0": [{"selector": {}, "maxUnavailable": 0}, false],
	"a type named, maxUnavailable 0": [{"selector": {"matchLabels": {"fleetplane.dev/workload-type": "training"}}, "maxUnavailable": 0}, false],
	"types by expression, maxUnavailable 0": [{"selector": {"matchExpressions": [{"key": "fleetplane.dev/workload-type", "operator": "In", "values": ["web", "training"]}]}, "maxUnavailable": 0}, false],
	"cpu service without the type label, maxUnavailable 0": [{"selector": cpu_only, "maxUnavailable": 0}, true],
	"cpu service naming no type, minAvailable 100%": [{"selector": {"matchLabels": {"fleetplane.dev/workload-type": "web"}}, "minAvailable": "100%"}, true],
	"types by expression naming none, maxUnavailable 0": [{"selector": {"matchExpressions": [{"key": "fleetplane.dev/workload-type", "operator": "In", "values": ["web"]}]}, "maxUnavailable": 0}, true],
	"no selector (matches no pod), maxUnavailable 0": [{"maxUnavailable": 0}, true],
}

test_disruption_budgets[name] if {
	some name, [spec, want] in pdb_cases
	admitted(pdb(spec)) == want
}

admitted(rev) if allowed(rev)

admitted(rev) := false if not allowed(rev)

test_disruption_budget_refusal_says_what_to_change if {
	some_message(pdb(pdb_cases["maxUnavailable 0"][0]), "eviction-budget: PodDisruptionBudget hold sets maxUnavailable 0, so no pod it covers can ever be evicted")
	some_message(pdb(pdb_cases["minAvailable 100%"][0]), "set maxUnavailable to 1 or more (or a percentage above 0%), or exclude accelerator pods from its selector (fleetplane.dev/workload-type DoesNotExist)")
}

test_disruption_budget_update_is_judged if {
	rev := testing.as_update(pdb({"selector": trainers, "maxUnavailable": 0}), pdb({"selector": trainers, "maxUnavailable": 1}).request.object)
	"eviction-budget" in rules(rev)
}

test_disruption_budgets_of_the_platform_are_not_judged if {
	rev := json.patch(pdb({"selector": {}, "maxUnavailable": 0}), [{"op": "replace", "path": "/request/namespace", "value": "kube-system"}])
	allowed(rev)
	not admission.fast_response with input as rev
}

# minAvailable as a count: refused when it reaches the pods the selector
# matches now, from the controller's workload records (replicas, pod labels).
records := {"ml-research": {
	"statefulsets.apps/trainer": {
		"uid": "u-1", "kind": "StatefulSet", "workload_type": "training", "devices_per_replica": 8,
		"approval_id": null, "replicas": 3, "pod_labels": {"app": "trainer", "fleetplane.dev/workload-type": "training"},
	},
	"deployments.apps/web": {
		"uid": "u-2", "kind": "Deployment", "workload_type": null, "devices_per_replica": 0,
		"approval_id": null, "replicas": 2, "pod_labels": {"app": "web"},
	},
	# the Deployment's own pods again: not counted twice
	"replicasets.apps/web-5d4f": {
		"uid": "u-3", "kind": "ReplicaSet", "workload_type": null, "devices_per_replica": 0,
		"approval_id": null, "replicas": 2, "pod_labels": {"app": "web", "pod-template-hash": "5d4f"},
	},
}}

by_expression := {"matchExpressions": [{"key": "app", "operator": "In", "values": ["trainer", "other"]}]}

counted_cases := {
	"minAvailable equal to the replicas": [{"selector": trainers, "minAvailable": 3}, false],
	"minAvailable above the replicas": [{"selector": trainers, "minAvailable": 5}, false],
	"minAvailable one below the replicas": [{"selector": trainers, "minAvailable": 2}, true],
	"selected by expression, equal": [{"selector": by_expression, "minAvailable": 3}, false],
	"NotIn, equal": [{"selector": {"matchExpressions": [{"key": "app", "operator": "NotIn", "values": ["web"]}]}, "minAvailable": 3}, false],
	"every pod of the namespace, one below all": [{"selector": {}, "minAvailable": 4}, true],
	"every pod of the namespace, all": [{"selector": {}, "minAvailable": 5}, false],
	"a cpu service's budget keeping every pod": [{"selector": {"matchLabels": {"app": "web"}}, "minAvailable": 2}, true],
	"no recorded pod matches": [{"selector": {"matchLabels": {"app": "elsewhere"}}, "minAvailable": 3}, true],
	"a count as a string is a percentage or nothing": [{"selector": trainers, "minAvailable": "50%"}, true],
}

test_counted_disruption_budgets[name] if {
	some name, [spec, want] in counted_cases
	admitted(pdb(spec)) == want with data.fleetplane.workloads as records
}

test_a_count_is_admitted_without_records if {
	# a budget written before its workload: nothing to count yet
	allowed(pdb({"selector": trainers, "minAvailable": 3}))
	allowed(pdb({"selector": trainers, "minAvailable": 3})) with data.fleetplane.workloads as {}
}

test_records_of_an_older_controller_count_nothing if {
	older := json.remove(records, ["ml-research/statefulsets.apps~1trainer/replicas"])
	allowed(pdb({"selector": trainers, "minAvailable": 3})) with data.fleetplane.workloads as older
}

test_a_counted_refusal_names_the_pods_it_keeps if {
	some_message(
		pdb({"selector": trainers, "minAvailable": 3}),
		"eviction-budget: PodDisruptionBudget hold sets minAvailable 3 while its selector matches 3 pods (statefulsets.apps/trainer: 3), so no pod it covers can ever be evicted",
	) with data.fleetplane.workloads as records
}

test_a_counted_update_is_judged if {
	rev := testing.as_update(pdb({"selector": trainers, "minAvailable": 3}), pdb({"selector": trainers, "minAvailable": 1}).request.object)
	"eviction-budget" in rules(rev) with data.fleetplane.workloads as records
}
