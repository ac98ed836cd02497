package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# Issue 33: what a workload holds during its life, beyond its replicas.

# ----------------------------------------------------------------- surge

with_strategy(rev, strategy) := object.union(rev, {"request": {"object": {"spec": {"strategy": strategy}}}})

rolling(surge) := {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": surge}}

test_deployment_surge[name] if {
	some name, [spec, replicas, want] in {
		"the default, 25% rounded up": [{}, 4, 1],
		"25% of 5 rounds up to 2": [{}, 5, 2],
		"25% of one replica is one pod": [{}, 1, 1],
		"a percentage": [{"strategy": rolling("50%")}, 3, 2],
		"a count": [{"strategy": rolling(3)}, 2, 3],
		"no surge": [{"strategy": rolling(0)}, 4, 0],
		"recreate": [{"strategy": {"type": "Recreate"}}, 4, 0],
		"no replicas": [{}, 0, 0],
		"malformed (refused by the surge rule)": [{"strategy": rolling("lots")}, 4, 0],
	}
	admission.deployment_surge(spec, replicas) == want
}

# 8 approved training replicas of 8 GPUs are training's maximum (64, as much
# as the approval covers); a rollout's surge goes past it.
approved := testing.with_annotations(testing.training, {"fleetplane.dev/approval-id": "APR-2026-001"})

serving := testing.deployment(approved, 8)

surge_cases := {
	"a rollout with the default surge": [serving, {"max-accelerators", "approval"}],
	"a surge by count": [with_strategy(serving, rolling(1)), {"max-accelerators", "approval"}],
	"recreate": [with_strategy(serving, {"type": "Recreate"}), set()],
	"no surge": [with_strategy(serving, rolling(0)), set()],
	"a small deployment surges within the maximum": [testing.deployment(approved, 4), set()],
	"a statefulset does not surge": [testing.statefulset(approved, 8), set()],
	"a surge that is no number": [with_strategy(serving, rolling("lots")), {"surge"}],
	"a cpu deployment surges freely": [testing.deployment(testing.cpu, 100), set()],
}

test_surge_is_held[name] if {
	some name, [rev, want] in surge_cases
	rules(rev) == want
}

test_surge_message_says_how_to_remove_it if {
	some_message(serving, "max-accelerators: the workload holds 80 accelerators at once (replicas x devices per pod) (including 2 pods of a rolling update's surge; strategy Recreate or maxSurge 0 removes them); training workloads may hold at most 64")
	some_message(with_strategy(serving, rolling("lots")), `maxSurge "lots"`)
}

# The surge counts toward the approval threshold (32) too.
test_surge_needs_the_approval if {
	rules(with_strategy(testing.deployment(testing.training, 3), rolling(1))) == {"approval"}
	rules(with_strategy(testing.deployment(testing.training, 3), rolling(0))) == set()
}

surge_update(old, new) := testing.as_update(with_strategy(serving, new), with_strategy(serving, old).request.object)

# An update of the strategy alone is judged like a create of what it holds.
test_raised_surge_is_judged_on_update if {
	rev := surge_update(rolling(0), rolling(1))
	eval(rev, "mode") == "holding"
	eval(rev, "old_total_devices") == 64
	eval(rev, "total_devices") == 72
	rules(rev) == {"max-accelerators", "approval"}
}

test_lowered_surge_is_admitted if {
	rules(surge_update(rolling(1), rolling(0))) == set()
	rules(surge_update(rolling(0), {"type": "Recreate"})) == set()
}

# ------------------------------------------------------------- restarts

restarting(rev, fields) := object.union(rev, {"request": {"object": {"spec": fields}}})

trainer := testing.volcano([["worker", 2, testing.training]])

restart_job := {"policies": [{"event": "PodFailed", "action": "RestartJob"}]}

test_volcano_restarts_are_runs[name] if {
	some name, [rev, want] in {
		"no policies: each pod runs once": [trainer, 2],
		"a policy that aborts": [restarting(trainer, {"policies": [{"event": "PodEvicted", "action": "AbortJob"}]}), 2],
		"RestartJob, maxRetry defaults to 3": [restarting(trainer, restart_job), 8],
		"RestartJob with maxRetry 1": [restarting(trainer, object.union(restart_job, {"maxRetry": 1})), 4],
		"RestartTask on the task": [
			restarting(trainer, {"maxRetry": 2, "tasks": [{"name": "worker", "replicas": 2, "template": testing.training, "policies": [{"event": "PodFailed", "action": "RestartTask"}]}]}),
			6,
		],
		"a task's larger maxRetry": [
			restarting(trainer, object.union(restart_job, {"maxRetry": 1, "tasks": [{"name": "worker", "replicas": 2, "template": testing.training, "maxRetry": 5}]})),
			12,
		],
		"RestartPod": [restarting(trainer, {"maxRetry": 2, "policies": [{"event": "PodFailed", "action": "RestartPod"}]}), 6],
		"a retry limit that is no number": [restarting(trainer, object.union(restart_job, {"maxRetry": "many"})), null],
	}
	[f.runs | some f in eval(rev, "facts")] == [want]
}

# Restarts are priced: four runs of each pod cost four times one.
test_volcano_restarts_are_priced if {
	once := eval(trainer, "estimate_usd")
	restarted := eval(restarting(trainer, restart_job), "estimate_usd")
	restarted == 4 * once
}

test_unbounded_retries_are_refused if {
	rev := restarting(trainer, object.union(restart_job, {"maxRetry": "many"}))
	"budget" in rules(rev)
}
