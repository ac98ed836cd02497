# Fast path: Most reviews the gate sees are the common case: a well-formed
# CREATE of one pod template with app containers only, whose model is
# selected by nodeSelector or by one required node affinity expression `In`
# on the model label (the set of models a pod accepts), with nothing the
# platform owns, no unusual security setting and no other way to reach
# accelerators than its limits. fast_response answers such a review in two rules over the
# request (fast_base, fast_verdict), where the explaining rules derive every
# fact, place and message: allowed, with the budget warnings the full rules
# would give, or denied when it breaks only the rules reviews break most often
# (image registry, no model selected, priority class, idle timeout, queue,
# budget over the limit), with the
# full rules' messages from the same functions. Whenever it cannot decide
# (anything unusual: init containers, MIG slices, node affinity of any other
# shape, several templates, two accelerator families, an update, a security context beyond
# the plain one, device variables, a restricted pod security level, a
# platform-owned key, a pool restricted to teams, a runtime nothing bounds
# for a type the team is not exempt for, any other rule that might fire), it is undefined and system.main answers from the full rules, which
# decide and explain. So it may be undefined where the full rules answer, and
# where it answers it must give their very response: fast_test.rego (with
# fast_verdict_test, fast_security_test and fast_budget_test) and
# tests/policies/test_fast_path.py check exactly that on every fixture, the
# review corpus, the trace and mutations of them.
#
# One concern per file: this one holds the response and fast_base (what the
# fast path reads of a review and when it stands aside); fast_security.rego
# the security rules, fast_verdict.rego the accelerator rules and
# fast_budget.rego the budget.
#
# The replay's pods select their models by the affinity shape, and a fifth of
# them are unbounded inference of an exempt team: reading both took OPA's CPU
# for the whole default trace from 127 to 68 CPU-seconds, the replay from
# 93 s to 64 s wall on two free cores, every figure the same (docs/replay.md,
# "Speed").
#
# Written for OPA's evaluator, whose costs are uneven (measured per
# expression): a reference compared with a constant costs ~0.15 us, a builtin
# call whose result is compared ~0.7 us, a comprehension ~2 us, each rule or
# function call ~1 us plus its body. So the checks are flat expressions in two
# rule bodies, comprehensions only where a list must be walked, and functions
# only where an else chain lets the common case skip work.
package fleetplane.admission

import data.fleetplane.lib
import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   The AdmissionReview response (uid, allowed, status when denied, warnings
#   when there are some), exactly as the full rules would build it, when the
#   fast path can decide; undefined otherwise.
fast_response := {"uid": input.request.uid, "allowed": true} if {
	fast_verdict == {"denials": [], "warnings": []}
} else := {"uid": input.request.uid, "allowed": true, "warnings": fast_verdict.warnings} if {
	fast_verdict.denials == []
} else := object.union(
	{"uid": input.request.uid, "allowed": false, "status": {
		"code": 403,
		"reason": "Forbidden",
		"message": concat("\n", sort(fast_verdict.denials)),
	}},
	fast_warning_field(fast_verdict.warnings),
) if {
	fast_verdict
}

fast_warning_field([]) := {}

fast_warning_field(warnings) := {"warnings": warnings} if warnings != []

# METADATA
# description: True only for reviews the full rules allow, with fast_warnings.
fast_allowed if fast_verdict.denials == []

# METADATA
# description: The warnings of a review fast_allowed allows.
fast_warnings := fast_verdict.warnings if fast_verdict.denials == []

# METADATA
# description: >-
#   What the fast rules read of a well-formed CREATE of one pod template whose
#   containers pass the security and access rules but the registry one (in
#   judged namespaces): namespace, where (the template's place, for
#   messages), template (its record, see workloads.templates), denials (of
#   images from registries that are not allowed), spec, selector, labels,
#   annotations, affinity (the template's one required node affinity
#   expression `In` as {key, values}, or null without required node affinity;
#   see fast_required_affinity), replicas, wall and pod_deadline (positive
#   deadlines or null), grace (terminationGracePeriodSeconds, 30 when unset,
#   as written: fast_verdict reads it for accelerator templates), resources (the whole-device accelerator resources the limits
#   name), counts (the device counts of those limits) and limits (one entry
#   per accelerator limit). Undefined when anything is outside the common
#   case.
fast_base := {
	"namespace": ns,
	"where": t.where,
	"template": t,
	"denials": image_denials,
	"spec": spec,
	"selector": selector,
	"labels": labels,
	"annotations": annotations,
	"affinity": affinity,
	"replicas": replicas,
	"wall": t.deadline,
	"pod_deadline": pod_deadline,
	"grace": object.get(spec, "terminationGracePeriodSeconds", 30),
	"resources": {r | some limits in accelerators; some r, _ in limits},
	"counts": [n | some limits in accelerators; some q in limits; n := workloads.parse_count(q)],
	"limits": [1 | some limits in accelerators; some _ in limits],
} if {
	input.apiVersion == "admission.k8s.io/v1"
	input.kind == "AdmissionReview"
	request := input.request
	request.operation == "CREATE"
	uid := request.uid
	is_string(uid)
	uid != ""
	object.get(request, "subResource", "") == ""
	obj := request.object
	is_object(obj)
	ns := request.namespace
	is_string(ns)
	ns != ""
	is_object(data.fleetplane.config.namespaces)

	# One template of a gated kind, and nothing the platform owns on the object
	# (on a Pod, its template: checked below too).
	t := fast_template(request.kind, obj)
	fast_owners_ok(obj)
	not fast_owned_copied_key(obj)
	not obj.metadata.labels["fleetplane.dev/exempt"]
	not obj.metadata.labels["fleetplane.dev/preemptible"]
	count([key |
		t.where != "pod"
		some key, _ in object.get(obj, ["metadata", "annotations"], {})
		fast_read_annotation(key)
	]) == 0
	template := t.template
	is_object(template)
	spec := template.spec
	is_object(spec)
	containers := spec.containers
	is_array(containers)
	count(containers) > 0
	object.get(spec, "initContainers", []) == []
	object.get(spec, "ephemeralContainers", []) == []
	is_array(object.get(spec, "tolerations", []))
	not tolerates_maintenance(spec)
	not tolerates_burst_tier(spec)
	not unmodellable_placement(spec)
	volumes := object.get(spec, "volumes", [])
	is_array(volumes)
	selector := object.get(spec, "nodeSelector", {})
	is_object(selector)
	affinity := fast_required_affinity(object.get(spec, ["affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"], null))
	object.get(spec, "nodeName", "") == ""
	object.get(spec, "resourceClaims", []) == []

	# A pod security context with only fields no baseline rule reads; a
	# seccomp profile is read (Unconfined is denied) but the common
	# RuntimeDefault is plain.
	object.remove(object.get(spec, "securityContext", {}), {
		"runAsUser", "runAsGroup", "runAsNonRoot", "fsGroup", "fsGroupChangePolicy",
		"supplementalGroups", "supplementalGroupsPolicy", "seccompProfile",
	}) == {}
	object.get(spec, ["securityContext", "seccompProfile", "type"], "RuntimeDefault") in {"RuntimeDefault", "Localhost"}
	metadata := object.get(template, "metadata", {})
	labels := object.get(metadata, "labels", {})
	is_object(labels)
	annotations := object.get(metadata, "annotations", {})
	is_object(annotations)
	not labels["fleetplane.dev/exempt"]
	not labels["fleetplane.dev/preemptible"]

	# The template's Volcano queue is read by fast_verdict (every accelerator
	# template in a team namespace names one); any other key a rule reads
	# takes the full rules.
	count([key | some key, _ in annotations; fast_read_annotation(key); key != "scheduling.volcano.sh/queue-name"]) == 0

	# The pod security level is baseline: no workload type or an unknown one
	# (the accelerator rules decide), or a type whose pod_security is
	# baseline; a type without one is left to the full rules.
	object.get(data.fleetplane.config.workload_types, object.get(labels, "fleetplane.dev/workload-type", ""), {"pod_security": "baseline"}).pod_security == "baseline"
	replicas := t.replicas
	is_number(replicas)
	replicas >= 0
	replicas == floor(replicas)

	# Deadlines: positive whole numbers or null (one pass, no call while
	# both are null, the common case).
	pod_deadline := object.get(spec, "activeDeadlineSeconds", null)
	count([d | some d in [t.deadline, pod_deadline]; d != null; not fast_positive_whole(d)]) == 0

	# Containers: well formed; no MIG slices (the full rules handle those);
	# every accelerator request has a limit and equals it; a plain security
	# context and nothing the security and access rules look for. One pass,
	# keeping each container's accelerator limits.
	whole := lib.accelerator_resources
	mig := lib.mig_resource_prefix
	accelerators := [object.filter(limits, whole) |
		some c in containers
		name := c.name
		is_string(name)
		name != ""
		image := c.image
		is_string(image)
		image != ""
		resources := object.get(c, "resources", {})
		limits := object.get(resources, "limits", {})
		is_object(limits)
		requests := object.get(resources, "requests", {})
		is_object(requests)
		not strings.any_prefix_match(object.keys(object.union(limits, requests)), {mig, lib.dra_extended_resource_prefix})
		object.subset(limits, object.filter(requests, whole))

		# A container security context with only fields no baseline rule
		# reads (capabilities only to drop), and nothing else a rule reads.
		object.remove(object.get(c, "securityContext", {}), {
			"runAsUser", "runAsGroup", "runAsNonRoot", "readOnlyRootFilesystem",
			"allowPrivilegeEscalation", "capabilities",
		}) == {}
		not c.securityContext.capabilities.add
		not c.lifecycle
		not c.resources.claims
	]
	count(accelerators) == count(containers)

	# Nothing else a container rule reads: host ports, the runtime's device
	# variables, probes aimed at a host. One pass over what the containers
	# carry (a function call per container would cost more).
	count([1 |
		some c in containers
		some field, value in object.filter(c, {"ports", "env", "livenessProbe", "readinessProbe", "startupProbe"})
		fast_unusual_field(field, value)
	]) == 0

	image_denials := fast_image_denials(ns, t.where, spec, containers, volumes)
}

# The fast path's constants are written where they are used, and its checks
# inline where they can be: a constant rule costs OPA an evaluation (about 30
# allocations) the first time a review refers to it, a function call about
# 15, a literal or a reference next to nothing.

# A container field a rule reads in a way the fast path does not decide:
# a host port, one of the runtime's device variables, a probe aimed at a
# host or with its own grace period.
fast_unusual_field("ports", ports) if {
	some port in ports
	port.hostPort
}

fast_unusual_field("env", env) if {
	some variable in env
	variable.name in {
		"NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES", "NVIDIA_IMEX_CHANNELS",
		"NVIDIA_GDS", "NVIDIA_MOFED", "NVIDIA_GDRCOPY", "NVIDIA_NVSWITCH",
	}
}

fast_unusual_field(field, probe) if {
	field in {"livenessProbe", "readinessProbe", "startupProbe"}
	some kind in ["httpGet", "tcpSocket"]
	probe[kind].host
}

fast_unusual_field(field, probe) if {
	field in {"livenessProbe", "startupProbe"}
	probe.terminationGracePeriodSeconds
}

# An annotation a rule reads: the platform's own (lib.platform_owned), the
# Volcano queue, an AppArmor profile. Called only for the annotations there
# are (most pods have none or a few).
fast_read_annotation(key) if {
	key in {
		"fleetplane.dev/idle-warned-at", "fleetplane.dev/reclaim-deadline",
		"fleetplane.dev/runtime-warned-at", "fleetplane.dev/stop-deadline", "fleetplane.dev/orphan-found-at",
		"fleetplane.dev/straggler-reported-at",
		"fleetplane.dev/reclaimed-at", "fleetplane.dev/reclaimed-replicas", "fleetplane.dev/reclaim-reason",
		"fleetplane.dev/preempted-by", "fleetplane.dev/preempted-at", "fleetplane.dev/preemption-reason",
		"fleetplane.dev/preemption-victims", "scheduling.k8s.io/group-name", "scheduling.volcano.sh/queue-name",
	}
} else if {
	startswith(key, "container.apparmor.security.beta.kubernetes.io/")
}

# The one shape of required node affinity the fast path reads besides none
# (null): one term of one expression `In` with some values, as a pod that
# accepts several models says so ({key, values}; fast_model decides whether
# the key is a model label). Undefined for any other shape: several terms or
# expressions, another operator, values that are not a non-empty list.
fast_required_affinity(null) := null

fast_required_affinity(required) := {"key": e.key, "values": e.values} if {
	[term] := required.nodeSelectorTerms
	[e] := term.matchExpressions
	e.operator == "In"
	is_string(e.key)
	is_array(e.values)
	count(e.values) > 0
}

# The template of a Pod or of a workload controller's spec.template, as
# workloads.templates gives it, without its general dispatch; the other kinds
# but Volcano Jobs through `templates`, when they have one.
fast_template(kind, obj) := {
	"where": "pod", "template": obj, "replicas": 1, "deadline": null,
	"runs": 1, "replaced": false, "bounded": true,
} if {
	kind.kind == "Pod"
	kind.group == ""
} else := {
	"where": "spec.template", "template": obj.spec.template, "replicas": replicas + surge, "deadline": null,
	"runs": replicas, "replaced": true, "bounded": true,
} if {
	kind.group == "apps"
	kind.kind in {"Deployment", "StatefulSet", "ReplicaSet"}
	replicas := object.get(obj.spec, "replicas", 1)
	surge := {true: deployment_surge(obj.spec, replicas), false: 0}[kind.kind == "Deployment"]
} else := t if {
	# Volcano Jobs take the full rules, which also check their queue, as do
	# KubeRay's kinds (their labels name their PodGroup's queue:
	# operator_copies.rego); runtimes hold nothing (lib/workloads/runtime.rego).
	not kind_class in {"volcano", "runtime", "raycluster", "rayjob"}
	[t] := templates
}

# A platform-owned key in metadata an operator copies onto what it makes,
# other than the pod template (a JobSet's Job templates:
# workloads.copied_metadata_places): the full rules refuse it (trust.rego).
fast_owned_copied_key(obj) if {
	some [_, metadata] in workloads.copied_metadata_places(obj, kind_class)
	some field, keys in lib.platform_owned
	some key in keys
	object.get(metadata, [field, key], null) != null
}

# Owner references are the platform's to write (owners.rego): none on the
# object, or a request from the platform.
fast_owners_ok(obj) if {
	count(object.get(obj, ["metadata", "ownerReferences"], [])) == 0
} else if {
	platform_requester
}

fast_positive_whole(x) if {
	is_number(x)
	x > 0
	x == floor(x)
}
