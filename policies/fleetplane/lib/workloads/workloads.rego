# METADATA
# title: Workloads
# description: >-
#   Finds the pod templates inside the objects the admission gate sees, checks
#   their shape, and computes accelerator demand with Kubernetes semantics.
#   Every function takes the object it works on; nothing here reads input.
package fleetplane.lib.workloads

import data.fleetplane.lib

# METADATA
# description: >-
#   The class of an AdmissionReview request.kind, by "group/kind": how the pod
#   templates of the kinds the gate knows are found. Undefined for other kinds
#   (see workload_class). The operators' kinds have a file each beside this
#   one (jobset.rego, leaderworkerset.rego, ray.rego, trainjob.rego);
#   "runtime" is a kind whose templates another object instantiates
#   (runtime.rego): judged for who writes the platform's keys, not for what
#   it holds. The table lives inside the function: as a rule of
#   its own it would cost OPA a rule evaluation on every review.
kind_class(gvk) := {
	"/Pod": "pod",
	"apps/Deployment": "replicated",
	"apps/StatefulSet": "replicated",
	"apps/ReplicaSet": "replicated",
	"/ReplicationController": "replicated",
	"apps/DaemonSet": "daemonset",
	"batch/Job": "job",
	"batch/CronJob": "cronjob",
	"batch.volcano.sh/Job": "volcano",
	"jobset.x-k8s.io/JobSet": "jobset",
	"leaderworkerset.x-k8s.io/LeaderWorkerSet": "leaderworkerset",
	"ray.io/RayCluster": "raycluster",
	"ray.io/RayJob": "rayjob",
	"trainer.kubeflow.org/TrainJob": "trainjob",
	"trainer.kubeflow.org/TrainingRuntime": "runtime",
	"flow.volcano.sh/JobTemplate": "runtime",
	"flow.volcano.sh/JobFlow": "runtime",
	"batch.volcano.sh/CronJob": "runtime",
}[concat("/", [object.get(gvk, "group", ""), gvk.kind])]

# METADATA
# description: >-
#   The class of a request's object: its kind_class, else "generic" for a
#   kind the gate does not know that carries pod templates somewhere under
#   spec (an operator a platform team added in the configuration, whose kind
#   the gate has no file for), found by their shape. Undefined for objects without pod templates.
workload_class(gvk, obj) := class if {
	class := kind_class(gvk)
} else := "generic" if {
	count(discovered_templates(obj)) > 0
}

# METADATA
# description: The value when it is an object, otherwise an empty object.
as_object(x) := x if {
	is_object(x)
} else := {}

# METADATA
# description: The value when it is an array, otherwise an empty array.
as_array(x) := x if {
	is_array(x)
} else := []

# METADATA
# description: >-
#   Pod templates of an object, each {where, template, replicas, deadline,
#   runs, replaced, bounded, bound}: where is the path users see in messages;
#   replicas is the number of pods of the template that run at once (raw
#   value, see template_problems; 0 when unbounded); deadline is a
#   workload-level activeDeadlineSeconds (a wall-clock bound on the whole
#   workload) or null; runs is how many pods the template starts over the
#   workload's life (completions and retries for Jobs), null when that has no
#   bound; replaced is true when a pod that ends is replaced (controllers
#   that keep replicas running), so a pod's activeDeadlineSeconds bounds one
#   pod but not the workload; bounded is false when nothing bounds the pods
#   running at once, and bound then says what to set.
templates(obj, "pod") := [{
	"where": "pod", "template": obj, "replicas": 1, "deadline": null,
	"runs": 1, "replaced": false, "bounded": true, "bound": "",
}]

templates(obj, "replicated") := [{
	"where": "spec.template",
	"template": object.get(obj, ["spec", "template"], null),
	"replicas": replicas,
	"deadline": null,
	"runs": replicas,
	"replaced": true,
	"bounded": true,
	"bound": "",
}] if {
	replicas := object.get(obj, ["spec", "replicas"], 1)
}

templates(obj, "daemonset") := [{
	"where": "spec.template",
	"template": object.get(obj, ["spec", "template"], null),
	"replicas": 0,
	"deadline": null,
	"runs": 0,
	"replaced": true,
	"bounded": false,
	"bound": "a DaemonSet runs one pod on every node it selects, so nothing bounds the pods it runs; run accelerator work as a Deployment, StatefulSet or Job with replicas",
}]

templates(obj, "job") := [job_template("spec.template", as_object(object.get(obj, "spec", {})))]

templates(obj, "cronjob") := [job_template(
	"spec.jobTemplate.spec.template",
	as_object(object.get(obj, ["spec", "jobTemplate", "spec"], {})),
)]

templates(obj, "volcano") := [t |
	some i, task in as_array(object.get(obj, ["spec", "tasks"], []))
	replicas := object.get(as_object(task), "replicas", 1)
	t := {
		"where": sprintf("spec.tasks[%d].template", [i]),
		"template": object.get(as_object(task), "template", null),
		"replicas": replicas,
		"deadline": null,
		"runs": replicas,
		"replaced": false,
		"bounded": true,
		"bound": "",
	}
]

templates(obj, "generic") := discovered_templates(obj)

job_template(where, job_spec) := {
	"where": where,
	"template": object.get(job_spec, "template", null),
	"replicas": job_concurrency(job_spec),
	"deadline": object.get(job_spec, "activeDeadlineSeconds", null),
	"runs": job_runs(job_spec),
	"replaced": false,
	"bounded": true,
	"bound": "",
}

# METADATA
# description: >-
#   Pods of a Job running at once: parallelism (default 1), bounded by
#   completions when that is smaller.
job_concurrency(job_spec) := min({p, c}) if {
	p := object.get(job_spec, "parallelism", 1)
	c := job_spec.completions
	is_whole(p)
	is_whole(c)
} else := object.get(job_spec, "parallelism", 1)

# METADATA
# description: >-
#   Pods a Job starts over its life, each running at most its pod deadline:
#   the completions (or, without completions, the parallel pods of a work
#   queue) plus the retries backoffLimit allows (default 6); for an Indexed
#   Job with backoffLimitPerIndex, every index may run 1 + that many times.
#   null when nothing bounds them: a podFailurePolicy rule with action Ignore
#   restarts failed pods without counting them, or a count is malformed.
job_runs(job_spec) := null if {
	some rule in as_array(object.get(job_spec, ["podFailurePolicy", "rules"], []))
	object.get(as_object(rule), "action", "") == "Ignore"
} else := c * (1 + per_index) if {
	job_spec.completionMode == "Indexed"
	per_index := job_spec.backoffLimitPerIndex
	is_whole(per_index)
	c := job_spec.completions
	is_whole(c)
} else := base + retries if {
	base := object.get(job_spec, "completions", object.get(job_spec, "parallelism", 1))
	is_whole(base)
	retries := object.get(job_spec, "backoffLimit", 6)
	is_whole(retries)
} else := null

# METADATA
# description: >-
#   Pod templates found by shape in an object of a kind the gate does not
#   know: every object under spec with spec.containers a list. Each is a
#   template as in templates; its pods at once are the product of the counts
#   its enclosing objects declare (maxReplicas, else replicas, else
#   parallelism bounded by completions, else size), and unbounded when none
#   declares one. Such a kind may replace its pods, so pod deadlines do not
#   bound it.
discovered_templates(obj) := [t |
	spec := as_object(object.get(obj, "spec", {}))
	nodes := {path: node | walk(spec, [path, node]); is_object(node)}
	some path, node in nodes
	is_array(node.spec.containers)
	count(path) > 0
	counts := [n |
		some k in numbers.range(0, count(path) - 1)
		n := multiplicity(nodes[array.slice(path, 0, k)])
	]
	replicas := product(counts)
	where := concat("", array.concat(["spec"], [step | some p in path; step := path_step(p)]))
	t := {
		"where": where,
		"template": node,
		"replicas": {true: replicas, false: 0}[count(counts) > 0],
		"deadline": null,
		"runs": {true: replicas, false: 0}[count(counts) > 0],
		"replaced": true,
		"bounded": count(counts) > 0,
		"bound": sprintf(
			"no replicas, maxReplicas, parallelism or size encloses %s, so nothing bounds the pods it runs; set replicas (or maxReplicas) on the object that holds it",
			[where],
		),
	}
]

path_step(p) := sprintf("[%d]", [p]) if is_number(p)

path_step(p) := concat("", [".", p]) if is_string(p)

# The count of pods an object of a generic kind declares for what it encloses.
multiplicity(node) := n if {
	n := node.maxReplicas
	is_whole(n)
} else := n if {
	n := node.replicas
	is_whole(n)
} else := job_concurrency(node) if {
	is_whole(node.parallelism)
} else := n if {
	n := node.size
	is_whole(n)
}

# METADATA
# description: >-
#   Pod-seconds a template's pods may run in all, the quantity its price is
#   multiplied by: runs x the longest a run lasts (the pod deadline, unless
#   pods are replaced, else the type's default runtime), and, with a
#   workload deadline, at most replicas x that deadline. Undefined when
#   neither bounds it: the caller prices that as unbounded.
pod_seconds(replicas, runs, deadline, replaced, pod_deadline, fallback) := runs * pod_deadline if {
	# Without a workload deadline, the common cases first (no call).
	deadline == null
	replaced == false
	is_number(runs)
	is_number(pod_deadline)
} else := runs * fallback if {
	deadline == null
	is_number(runs)
	is_number(fallback)
} else := min(bounds) if {
	bounds := array.concat(
		[b | is_number(runs); b := runs * run_seconds(replaced, pod_deadline, fallback)],
		[b | is_number(deadline); b := replicas * deadline],
	)
	count(bounds) > 0
}

# The longest one pod runs: its own deadline, unless pods are replaced; else
# the type's default runtime; undefined when neither applies.
run_seconds(false, pod_deadline, _) := pod_deadline if is_number(pod_deadline)

run_seconds(false, null, fallback) := fallback if is_number(fallback)

run_seconds(true, _, fallback) := fallback if is_number(fallback)

# METADATA
# description: True for a JSON integer that is not negative.
is_whole(x) if {
	is_number(x)
	x >= 0
	x == floor(x)
}

# METADATA
# description: >-
#   Problems that make an object impossible to judge; each names the field and
#   what it must be. A gated object with any of these is denied.
shape_problems(obj, class) := union({
	{"spec.tasks must be a non-empty list of tasks" |
		class == "volcano"
		count(as_array(object.get(obj, ["spec", "tasks"], []))) == 0
	},
	{"spec.replicatedJobs must be a non-empty list of replicated jobs" |
		class == "jobset"
		count(as_array(object.get(obj, ["spec", "replicatedJobs"], []))) == 0
	},
	{"spec.trainer.image is missing: the gate cannot see the image of the runtime's template, so a TrainJob names the image its nodes run; set spec.trainer.image" |
		class == "trainjob"
		not non_empty_string(object.get(obj, ["spec", "trainer", "image"], null))
	},
	{msg |
		some t in templates(obj, class)
		some msg in template_problems(t)
	},
})

template_problems(t) := union({
	{sprintf("%s is missing", [t.where]) | not is_object(t.template)},
	{sprintf("%s.spec is missing", [t.where]) |
		is_object(t.template)
		not is_object(object.get(t.template, "spec", null))
	},
	{sprintf("%s.spec.containers must be a non-empty list", [t.where]) |
		is_object(t.template.spec)
		not non_empty_array(object.get(t.template.spec, "containers", null))
	},
	{sprintf("%s.spec.%s must be a list", [t.where, field]) |
		some field in ["initContainers", "ephemeralContainers", "tolerations", "volumes"]
		value := t.template.spec[field]
		not is_array(value)
	},
	{sprintf("%s.metadata.%s must be a map of strings", [t.where, field]) |
		some field in ["labels", "annotations"]
		value := t.template.metadata[field]
		not is_object(value)
	},
	{sprintf("%s: %s", [container_where(t.where, entry), msg]) |
		some entry in containers(t.template.spec)
		some msg in container_problems(entry.container)
	},
	{sprintf("%s: replicas %s must be a non-negative integer", [t.where, json.marshal(t.replicas)]) |
		not is_whole(t.replicas)
	},
	{sprintf("%s: activeDeadlineSeconds %s must be a positive integer", [t.where, json.marshal(d)]) |
		some d in [t.deadline, object.get(as_object(t.template), ["spec", "activeDeadlineSeconds"], null)]
		d != null
		not positive_whole(d)
	},
})

# METADATA
# description: >-
#   True when a template has the shape the rules need (the fast path);
#   template_problems explains a false. entries are containers(spec). Written
#   without helper calls or every (counting comprehensions instead): the gate
#   evaluates it for every template it sees, and both cost OPA far more than
#   an inline expression.
template_ok(t, entries) if {
	spec := t.template.spec
	is_object(spec)
	is_array(spec.containers)
	count(spec.containers) > 0
	is_array(object.get(spec, "initContainers", []))
	is_array(object.get(spec, "ephemeralContainers", []))
	is_array(object.get(spec, "tolerations", []))
	is_array(object.get(spec, "volumes", []))
	metadata := object.get(t.template, "metadata", {})
	is_object(object.get(metadata, "labels", {}))
	is_object(object.get(metadata, "annotations", {}))
	count([e |
		some e in entries
		c := e.container
		is_string(c.name)
		c.name != ""
		is_string(c.image)
		c.image != ""
		resources := object.get(c, "resources", {})
		is_object(object.get(resources, "limits", {}))
		is_object(object.get(resources, "requests", {}))
	]) == count(entries)
	is_number(t.replicas)
	t.replicas >= 0
	t.replicas == floor(t.replicas)
	deadlines := [d | some d in [t.deadline, object.get(spec, "activeDeadlineSeconds", null)]; d != null]
	count([d | some d in deadlines; is_number(d); d > 0; d == floor(d)]) == count(deadlines)
} else := false

non_empty_array(x) if {
	is_array(x)
	count(x) > 0
}

positive_whole(x) if {
	is_whole(x)
	x > 0
}

container_problems(c) := union({
	{"must be an object" | not is_object(c)},
	{"name must be a non-empty string" |
		is_object(c)
		not non_empty_string(object.get(c, "name", null))
	},
	{"image must be a non-empty string" |
		is_object(c)
		not non_empty_string(object.get(c, "image", null))
	},
	{sprintf("resources.%s must be a map", [field]) |
		some field in ["limits", "requests"]
		value := c.resources[field]
		not is_object(value)
	},
})

non_empty_string(x) if {
	is_string(x)
	x != ""
}

# METADATA
# description: >-
#   Every container of a pod spec, each {list, index, container, sidecar,
#   limits, requests, counts}: list is "containers", "initContainers" or
#   "ephemeralContainers"; limits and requests hold the raw accelerator
#   quantities; counts the limits that parse as whole devices. Computed once
#   per pod template: everything else reads these entries.
containers(spec) := [entry |
	some list in ["containers", "initContainers", "ephemeralContainers"]
	some i, c in spec[list]
	limits := object.union_n([
		{r: q | some r, q in c.resources.limits; r in lib.accelerator_resources},
		{r: q | some r, q in c.resources.limits; startswith(r, lib.mig_resource_prefix)},
		{r: q | some r, q in c.resources.limits; r in lib.dra_accelerator_resources},
	])
	sidecar := count({1 | list == "initContainers"; c.restartPolicy == "Always"}) == 1
	entry := {
		"list": list,
		"index": i,
		"container": c,
		"sidecar": sidecar,
		"running": true in {list == "containers", sidecar},
		"limits": limits,
		"requests": object.union_n([
			{r: q | some r, q in c.resources.requests; r in lib.accelerator_resources},
			{r: q | some r, q in c.resources.requests; startswith(r, lib.mig_resource_prefix)},
			{r: q | some r, q in c.resources.requests; r in lib.dra_accelerator_resources},
		]),
		"counts": {r: n | some r, q in limits; n := parse_count(q)},
	}
]

# METADATA
# description: How a container is named in messages, e.g. spec.template initContainers "setup".
container_where(where, entry) := sprintf("%s %s %q", [where, entry.list, entry.container.name]) if {
	non_empty_string(entry.container.name)
} else := sprintf("%s %s[%d]", [where, entry.list, entry.index])

# METADATA
# description: >-
#   An accelerator count: a JSON integer, or a string of decimal digits without
#   sign, fraction, exponent, suffix or leading zero. Undefined otherwise.
parse_count(q) := to_number(q) if {
	is_string(q)
	regex.match(`^(0|[1-9][0-9]*)$`, q)
}

parse_count(q) := q if is_whole(q)

# METADATA
# description: >-
#   True when every accelerator quantity parses and every request equals its
#   limit, false otherwise: the fast path; the problem functions below explain
#   a false. Counting comprehensions: OPA evaluates them for less than every.
quantities_ok(entries) if {
	count([e |
		some e in entries
		count(e.counts) == count(e.limits)
		count([r | some r, q in e.requests; parse_count(q) == e.counts[r]]) == count(e.requests)
	]) == count(entries)
} else := false

# METADATA
# description: >-
#   Accelerator quantities that cannot be parsed, as messages naming the
#   container, the field and the fix.
quantity_problems(where, entries) := {msg |
	some e in entries
	some field in ["limits", "requests"]
	some resource, q in e[field]
	not parse_count(q)
	msg := sprintf(
		"%s: %s[%s] %s is not a whole number of devices; write a non-negative integer such as \"1\"",
		[container_where(where, e), field, resource, json.marshal(q)],
	)
}

# METADATA
# description: >-
#   Extended resources must be set in limits; a request may only repeat the
#   limit. Messages name the container and the fix.
limit_problems(where, entries) := missing_limits(where, entries) | unequal_requests(where, entries)

missing_limits(where, entries) := {msg |
	some e in entries
	some resource, _ in e.requests
	not has_key(e.limits, resource)
	msg := sprintf(
		"%s: %s is requested but has no limit; set resources.limits[%s] (accelerators are allocated by limit)",
		[container_where(where, e), resource, resource],
	)
}

unequal_requests(where, entries) := {msg |
	some e in entries
	some resource, q in e.requests
	request := parse_count(q)
	limit := e.counts[resource]
	request != limit
	msg := sprintf(
		"%s: requests[%s] is %v but limits[%s] is %v; set them equal or drop the request",
		[container_where(where, e), resource, request, resource, limit],
	)
}

has_key(obj, key) if _ = obj[key]

# METADATA
# description: >-
#   Effective accelerator demand of one pod, per resource, with Kubernetes
#   semantics: the larger of the steady state (app containers plus sidecar init
#   containers) and the peak of each regular init container (itself plus the
#   sidecars started before it). Malformed quantities count as zero (and are
#   denied on their own).
demand(entries) := {r: n |
	some r in ({r | some e in entries; some r, _ in e.limits} | {r | some e in entries; some r, _ in e.requests})
	steady := sum([k | some e in entries; e.running; k := e.counts[r]])
	peaks := [peak |
		some e in entries
		e.list == "initContainers"
		not e.sidecar
		peak := object.get(e.counts, r, 0) + sum([k |
			some s in entries
			s.sidecar
			s.index < e.index
			k := s.counts[r]
		])
	]
	n := max(array.concat([steady], peaks))
}

# METADATA
# description: Total devices of a pod, all accelerator resources together (a MIG device counts as one).
devices(pod_demand) := sum([n | some n in pod_demand])

# METADATA
# description: Demand of a pod spec (convenience for callers outside the gate).
pod_demand(spec) := demand(containers(spec))
