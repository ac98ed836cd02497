# JobSet: The pod templates of a JobSet (jobset.x-k8s.io/v1alpha2), judged
# whole: every replicated job, each spec.replicatedJobs[i].replicas Jobs of
# the Job template spec.replicatedJobs[i].template (parallelism, completions,
# backoffLimit, activeDeadlineSeconds as for a batch/v1 Job), and the restarts
# of the whole set: a JobSet restarts by recreating every child Job, up to
# spec.failurePolicy.maxRestarts times (default 0), or without bound when a
# failure policy rule's action is RestartJobSetAndIgnoreMaxRestarts.
# Replicated jobs that wait for others (dependsOn) are counted as running
# together: an upper bound.
package fleetplane.lib.workloads

templates(obj, "jobset") := [t |
	spec := as_object(object.get(obj, "spec", {}))
	attempts := jobset_attempts(spec)
	some i, entry in as_array(object.get(spec, "replicatedJobs", []))
	replicated := as_object(entry)
	jobs := object.get(replicated, "replicas", 1)
	job := job_template(
		sprintf("spec.replicatedJobs[%d].template.spec.template", [i]),
		as_object(object.get(replicated, ["template", "spec"], {})),
	)
	t := object.union(job, {
		"replicas": times(jobs, job.replicas),
		"runs": runs_over(jobs, job.runs, attempts),
		"deadline": deadline_over(job.deadline, attempts),
	})
]

# METADATA
# description: >-
#   How many times a JobSet's child Jobs may be created in all: 1 + its
#   maxRestarts; null when a rule restarts it without counting, or the count
#   is malformed.
jobset_attempts(spec) := null if {
	some rule in as_array(object.get(spec, ["failurePolicy", "rules"], []))
	object.get(as_object(rule), "action", "") == "RestartJobSetAndIgnoreMaxRestarts"
} else := 1 + restarts if {
	restarts := object.get(spec, ["failurePolicy", "maxRestarts"], 0)
	is_whole(restarts)
} else := null

# METADATA
# description: >-
#   a x b when both are whole counts; otherwise the malformed one, so that
#   template_problems names it.
times(a, b) := a * b if {
	is_whole(a)
	is_whole(b)
} else := a if {
	not is_whole(a)
} else := b

# METADATA
# description: >-
#   Runs of a template over every copy and attempt: copies x runs of one x
#   attempts, null when any of them has no bound.
runs_over(copies, runs, attempts) := (copies * runs) * attempts if {
	is_whole(copies)
	is_number(runs)
	is_number(attempts)
} else := null

# METADATA
# description: >-
#   A wall-clock deadline of one attempt stretched over every attempt (each
#   may run to it); null without a deadline or a bound on attempts; a
#   malformed deadline is kept, so that template_problems names it.
deadline_over(deadline, attempts) := deadline * attempts if {
	is_whole(deadline)
	is_number(attempts)
} else := deadline if {
	deadline != null
	not is_whole(deadline)
} else := null

# METADATA
# description: >-
#   The metadata an operator copies onto an object it makes that is not a pod
#   template, as [place, metadata]: a JobSet's Job templates
#   (spec.replicatedJobs[i].template.metadata, onto each child Job), and in a
#   TrainingRuntime the JobSet template and its Job templates (the Trainer
#   makes the TrainJob's JobSet from them). The operator's controllers are
#   trusted to copy what the gate judged, so a platform-owned key written
#   there is refused where the user writes it (issue 30 item 3).
copied_metadata_places(obj, "jobset") := jobset_copied_places("spec", as_object(object.get(obj, "spec", {})))

copied_metadata_places(obj, "runtime") := array.concat(
	[["spec.template.metadata", as_object(object.get(obj, ["spec", "template", "metadata"], {}))]],
	jobset_copied_places("spec.template.spec", as_object(object.get(obj, ["spec", "template", "spec"], {}))),
) if is_array(object.get(obj, ["spec", "template", "spec", "replicatedJobs"], null))

copied_metadata_places(obj, class) := [] if {
	not class in {"jobset", "runtime"}
} else := [] if {
	class == "runtime"
	not is_array(object.get(obj, ["spec", "template", "spec", "replicatedJobs"], null))
}

jobset_copied_places(prefix, spec) := [[sprintf("%s.replicatedJobs[%d].template.metadata", [prefix, i]), as_object(object.get(as_object(entry), ["template", "metadata"], {}))] |
	some i, entry in as_array(object.get(spec, "replicatedJobs", []))
]
