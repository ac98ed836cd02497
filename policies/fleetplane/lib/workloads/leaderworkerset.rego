# LeaderWorkerSet: The pod templates of a LeaderWorkerSet
# (leaderworkerset.x-k8s.io/v1), judged whole: spec.replicas groups (default
# 1) of spec.leaderWorkerTemplate.size pods (default 1), one leader
# (leaderTemplate, or the workerTemplate when there is none) and size - 1
# workers, plus the groups a rolling update surges
# (rolloutStrategy.rollingUpdateConfiguration.maxSurge, a count or a
# percentage of replicas rounded up). Groups are replaced when their pods fail
# (as a StatefulSet's pods are), so pod deadlines do not bound them.
package fleetplane.lib.workloads

templates(obj, "leaderworkerset") := array.concat(leader, workers) if {
	spec := as_object(object.get(obj, "spec", {}))
	groups := object.get(spec, "replicas", 1)
	lwt := as_object(object.get(spec, "leaderWorkerTemplate", {}))
	size := object.get(lwt, "size", 1)
	at_once := add_counts(groups, surge(object.get(spec, ["rolloutStrategy", "rollingUpdateConfiguration", "maxSurge"], 0), groups))
	has_leader := is_object(object.get(lwt, "leaderTemplate", null))
	leader := [replicated_template("spec.leaderWorkerTemplate.leaderTemplate", lwt.leaderTemplate, at_once) | has_leader]
	per_group := {true: minus_one(size), false: size}[has_leader]
	workers := [replicated_template(
		"spec.leaderWorkerTemplate.workerTemplate",
		object.get(lwt, "workerTemplate", null),
		times(at_once, per_group),
	)]
}

# A template whose pods are kept running and replaced, as a Deployment's.
replicated_template(where, template, replicas) := {
	"where": where,
	"template": template,
	"replicas": replicas,
	"deadline": null,
	"runs": replicas,
	"replaced": true,
	"bounded": true,
	"bound": "",
}

# METADATA
# description: >-
#   The extra copies a rolling update may add: a whole count, or a
#   percentage of base rounded up (as Kubernetes rounds a surge); a
#   malformed value is kept, so that template_problems names it.
surge(value, base) := value if {
	is_whole(value)
} else := ceil((base * to_number(trim_suffix(value, "%"))) / 100) if {
	is_whole(base)
	is_string(value)
	regex.match(`^(0|[1-9][0-9]*)%$`, value)
} else := value

add_counts(a, b) := a + b if {
	is_whole(a)
	is_whole(b)
} else := a if {
	not is_whole(a)
} else := b

minus_one(n) := n - 1 if {
	is_whole(n)
	n >= 1
} else := sprintf("size %v (at least 1)", [n])
