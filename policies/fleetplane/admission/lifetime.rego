# Lifetime rules: What a workload holds during its life is more than its
# replicas show when another controller adds pods to them. A Deployment's
# rolling update starts up to maxSurge new pods before it stops old ones, so
# it holds replicas + surge pods at once (counted in what it holds: the
# maximum, the approval threshold, judged again when an update raises the
# surge). A Volcano Job whose policies restart it (RestartJob, RestartTask,
# RestartPod) runs its tasks again up to maxRetry times, each restart a new
# set of pods holding their devices anew (counted in its runs, so priced).
# Both are folded into the pod templates every rule reads (with_lifetime,
# applied to `templates` and `old_templates` in admission.rego and to the
# fast path's template), so the holding, approval and budget rules judge
# them with no rule of their own; an update that raises them is judged as
# the holding mode judges a raised replica count.
package fleetplane.admission

import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   The pod templates of obj with what its controller adds over its life:
#   a Deployment's surge in replicas (pods at once), a Volcano Job's
#   restarts in runs (pods over its life). Other kinds as they are.
with_lifetime(ts, obj) := [object.union(t, {"replicas": t.replicas + deployment_surge(obj.spec, t.replicas)}) |
	some t in ts
] if {
	input.request.kind.kind == "Deployment"
	input.request.kind.group == "apps"
} else := [object.union(t, {"runs": volcano_runs(t.runs, obj.spec, i)}) |
	some i, t in ts
] if {
	kind_class == "volcano"
} else := ts

# METADATA
# description: >-
#   The pods a Deployment's rolling update may start beyond its replicas:
#   none with strategy Recreate; maxSurge (default 25%) otherwise, a
#   percentage of the replicas rounded up as the Deployment controller
#   rounds it. A maxSurge that is neither a whole number nor a percentage
#   (the API server refuses it) counts as none here and is refused by the
#   surge rule below.
deployment_surge(spec, replicas) := 0 if {
	object.get(spec, ["strategy", "type"], "RollingUpdate") == "Recreate"
} else := 0 if {
	not workloads.is_whole(replicas)
} else := surge if {
	surge := object.get(spec, ["strategy", "rollingUpdate", "maxSurge"], "25%")
	workloads.is_whole(surge)
} else := ceil((replicas * percent) / 100) if {
	percent := surge_percent(object.get(spec, ["strategy", "rollingUpdate", "maxSurge"], "25%"))
} else := 0

surge_percent(value) := to_number(trim_suffix(value, "%")) if {
	is_string(value)
	regex.match(`^[0-9]+%$`, value)
}

# METADATA
# description: >-
#   A surge the gate cannot count is refused on an accelerator Deployment
#   (the API server refuses it too; this keeps the count closed).
deny contains msg if {
	mode in {"full", "holding"}
	accelerator_workload
	input.request.kind.kind == "Deployment"
	object.get(input.request.object.spec, ["strategy", "type"], "RollingUpdate") != "Recreate"
	surge := object.get(input.request.object.spec, ["strategy", "rollingUpdate", "maxSurge"], "25%")
	not workloads.is_whole(surge)
	not surge_percent(surge)
	msg := sprintf(
		"surge: spec.strategy.rollingUpdate.maxSurge %s is neither a whole number nor a percentage; set it to 0 (or use strategy Recreate) so a rollout holds no more accelerators than the replicas",
		[json.marshal(surge)],
	)
}

# METADATA
# description: >-
#   The hint the size and approval messages add for a Deployment whose
#   rollout surges: how many pods, and how to remove them. Empty otherwise.
surge_hint := sprintf(
	" (including %d pods of a rolling update's surge; strategy Recreate or maxSurge 0 removes them)",
	[surge],
) if {
	input.request.kind.kind == "Deployment"
	surge := sum([deployment_surge(input.request.object.spec, t.replicas) | some t in workloads.templates(input.request.object, kind_class)])
	surge > 0
} else := ""

# ------------------------------------------------------------ restarts

# The actions of a Volcano Job's policies that start a task's pods again
# (a job's policies apply to every task; a task's to itself).
restart_actions := {"RestartJob", "RestartTask", "RestartPod"}

# METADATA
# description: >-
#   The runs of task i of a Volcano Job: its runs once, or, when a policy
#   of the job or of the task restarts it, once plus maxRetry (default 3,
#   the larger of the job's and the task's) times. null when a retry limit
#   is not a whole number: nothing bounds the runs then.
volcano_runs(runs, spec, i) := runs if {
	not volcano_restarts(spec, i)
} else := runs * (1 + max(limits)) if {
	is_number(runs)
	limits := [object.get(spec, "maxRetry", 3), object.get(workloads.as_object(spec.tasks[i]), "maxRetry", 0)]
	count([r | some r in limits; not workloads.is_whole(r)]) == 0
} else := null

volcano_restarts(spec, _) if {
	some policy in workloads.as_array(object.get(spec, "policies", []))
	object.get(workloads.as_object(policy), "action", "") in restart_actions
}

volcano_restarts(spec, i) if {
	some policy in workloads.as_array(object.get(workloads.as_object(spec.tasks[i]), "policies", []))
	object.get(workloads.as_object(policy), "action", "") in restart_actions
}
