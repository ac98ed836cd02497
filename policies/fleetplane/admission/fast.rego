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
# where it answers it must give their very response: fast_test.rego and
# tests/policies/test_fast_path.py check exactly that on every fixture, the
# review corpus, the trace and mutations of them.
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

import data.fleetplane.budget
import data.fleetplane.lib
import data.fleetplane.lib.scheduling
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

# Owner references are the platform's to write (owners.rego): none on the
# object, or a request from the platform.
fast_owners_ok(obj) if {
	count(object.get(obj, ["metadata", "ownerReferences"], [])) == 0
} else if {
	platform_requester
}

# METADATA
# description: >-
#   The security rules: in the platform's own namespaces there are none (the
#   full rules judge nothing there: undefined, so they answer); in every
#   other namespace nothing may be privileged, share host namespaces or mount
#   hostPath or image volumes, and each image from a registry that is not
#   allowed is denied with the full rules' message (image_registry_message).
#   Undefined when a rule other than the registry one would fire, or the
#   registries are configured in a way the fast path does not read.
fast_image_denials(ns, where, spec, containers, volumes) := denials if {
	fast_judged_namespace(ns)
	not spec.hostNetwork
	not spec.hostPID
	not spec.hostIPC
	not fast_special_volume(volumes)
	not fast_privileged(containers)
	not fast_platform_image_by_tag(containers)
	registries := data.fleetplane.config.registries
	is_array(registries)

	# Every registry entry names a host (contains "." or ":", or is
	# localhost) and ends with "/" (see registry_prefix): then an image that
	# starts with an entry is already qualified (qualified_image leaves it as
	# it is) and is allowed; any other image is allowed when its qualified
	# name starts with one. Any other configuration takes the full rules.
	count([r | some r in registries; regex.match(`^([^/]*[.:][^/]*|localhost)/(.*/)?$`, r)]) == count(registries)
	denials := [image_registry_message(workloads.container_where(where, {"list": "containers", "container": c, "index": i}), c.image) |
		some i, c in containers
		not strings.any_prefix_match(c.image, registries)
		not strings.any_prefix_match(qualified_image(c.image), registries)
	]
}

# A team's namespace (mapped to anything but false, null included, as the
# full rules see them), or one the reviewed list of the platform's own does
# not name.
fast_judged_namespace(ns) if {
	data.fleetplane.config.namespaces[ns]
} else if {
	system := data.fleetplane.config.system_namespaces
	is_array(system)
	not ns in system
}

fast_privileged(containers) if {
	some c in containers
	c.securityContext.privileged
}

fast_special_volume(volumes) if {
	some volume in volumes
	volume.hostPath
}

fast_special_volume(volumes) if {
	some volume in volumes
	volume.image
}

fast_positive_whole(x) if {
	is_number(x)
	x > 0
	x == floor(x)
}

# METADATA
# description: >-
#   {denials, warnings} for a review in fast_base's common case: for a
#   workload that asks for no accelerator, fast_base's image denials and no
#   warnings; otherwise every accelerator rule checked (known type and team,
#   size under the limit and the approval threshold, capacity type,
#   checkpoint) with the image, model-selection, priority-class and
#   idle-timeout denials collected, and the budget: the team's spend plus this
#   workload's estimate under the warning line (no warning), over it (the
#   budget warning), or over the limit for a budget-exempt type (the exemption
#   warning); over the limit otherwise is a denial, for the full rules. A
#   workload nothing bounds in time is allowed with the exemption warning
#   when its team is exempt for its type (denied otherwise, by the full
#   rules).
#   A workload without accelerators must not reach them either (tolerate the
#   accelerator taints or select accelerator nodes). Undefined when the fast
#   path cannot decide.
fast_verdict := {"denials": fast_base.denials, "warnings": []} if {
	fast_base.limits == []
	not fast_base.annotations["scheduling.volcano.sh/queue-name"]
	fast_base.affinity == null
	not fast_reaches_accelerators(fast_base.spec, fast_base.selector)
} else := {"denials": denials, "warnings": warnings} if {
	b := fast_base
	cfg := data.fleetplane.config
	spec := b.spec

	# One accelerator family, every limit of it a whole count, some devices.
	[r] := [r | some r in b.resources]
	count(b.counts) == count(b.limits)
	devices := sum(b.counts)
	devices > 0

	# Team, type and the configuration the rules read.
	team := cfg.namespaces[b.namespace]
	team_config := cfg.teams[team]
	is_object(team_config)
	is_array(team_config.allowed_models)
	wt := b.labels[lib.keys.workload_type]
	tc := cfg.workload_types[wt]
	is_object(tc)
	is_number(tc.max_accelerators)
	is_array(tc.priority_classes)
	is_boolean(tc.checkpoint_required_on_spot)
	max_idle := tc.max_idle_timeout_seconds
	fast_number_or_null(max_idle)
	approval := cfg.approval
	is_number(approval.threshold_accelerators)

	# Size: bounded, under the type's limit and the approval threshold; a
	# CronJob's runs do not overlap; no ConfigMap or Secret may set the
	# runtime's device variables.
	b.template.bounded
	total := b.replicas * devices

	# A grace period within the bound (termination.rego's
	# max_termination_grace_seconds, as a literal); any other takes the full
	# rules.
	grace := b.grace
	is_number(grace)
	grace >= 0
	grace <= 120
	grace == floor(grace)
	total <= tc.max_accelerators
	total < approval.threshold_accelerators
	{true: object.get(input.request.object, ["spec", "concurrencyPolicy"], "Allow"), false: "Forbid"}[input.request.kind.kind == "CronJob"] in {"Forbid", "Replace"}
	count([1 |
		some c in spec.containers
		some source in c.envFrom
		strings.any_prefix_match(
			[
				"NVIDIA_VISIBLE_DEVICES", "NVIDIA_MIG_CONFIG_DEVICES", "NVIDIA_MIG_MONITOR_DEVICES", "NVIDIA_IMEX_CHANNELS",
				"NVIDIA_GDS", "NVIDIA_MOFED", "NVIDIA_GDRCOPY", "NVIDIA_NVSWITCH",
			],
			object.get(source, "prefix", ""),
		)
	]) == 0

	# Capacity: where the pod may run, as the full rules see it.
	placement := fast_spot_placement(spec, b.selector, b.affinity)
	pins := placement.pins_spot
	opens := placement.opens_spot
	{"any": true, "on-demand": opens == false, "spot": pins}[tc.capacity] == true
	capacity := {true: "spot", false: "on-demand"}[pins]
	not fast_checkpoint_missing(tc.checkpoint_required_on_spot, opens, b.annotations)

	# Model: one allowed model selected, or allowed models by affinity, or
	# none (a denial); the price; no pool of a model it may land on reserved
	# for other teams.
	[model_denials, price, picked] := fast_model(r, b.selector, b.affinity, team_config, capacity, b.where)
	is_number(price)

	#
	# Only the reserved pools are walked (config.reserved_pools, as the full
	# rules read them): a walk over every pool costs OPA about ten
	# allocations a pool (the replay's fleet has 30 pools: 280 of a review's
	# 2,350).
	is_object(cfg.pools)
	reserved_pools := cfg.reserved_pools
	is_object(reserved_pools)
	count([1 |
		some name, teams in reserved_pools
		fast_pool_restricts(name, teams, object.get(cfg.pools, name, {}), b.selector, picked, team)
	]) == 0

	# The rules reviews break most often, with the full rules' messages.
	rule_denials := array.concat(
		array.concat(b.denials, model_denials),
		array.concat(
			fast_priority_denial(spec, tc.priority_classes, b.where, wt),
			array.concat(
				fast_idle_timeout_denial(max_idle, b.annotations, b.where, wt),
				fast_queue_denial(b.annotations, team_config, b.where),
			),
		),
	)

	# Budget: this month's spend and the reservations plus the estimate
	# judged against both lines (a denial over the limit, with the full
	# rules' message); or, for a workload nothing bounds in time (no
	# estimate), a type the team is exempt for, with well-formed spend and
	# reservations (the full rules check those when there is no estimate).
	now := time.now_ns()
	month := budget.month(now)
	record := object.get(fast_spend, team, {"month": month, "usd": 0})
	is_string(record.month)
	spent := {true: record.usd, false: 0}[record.month == month]
	is_number(spent)
	spent >= 0
	reserved := fast_reserved(team, now)
	t := b.template
	seconds := fast_pod_seconds(t, b.wall, b.pod_deadline, tc.default_max_runtime_seconds, grace)
	limit := team_config.monthly_budget_usd
	is_number(limit)
	is_number(cfg.budget.warn_ratio)
	is_number(cfg.budget.deny_ratio)
	[budget_denials, warnings] := fast_cost_verdict(
		seconds,
		{"devices": devices, "price": price, "spent_usd": spent, "reserved_usd": reserved, "budget_usd": limit},
		cfg.budget,
		{"team": team, "type": wt, "where": b.where, "runs": t.runs},
	)
	denials := array.concat(rule_denials, budget_denials)
}

# Where the pod may run, as scheduling.spot_placement reads it, for the shapes
# fast_base lets through: without required node affinity, or with one whose
# key is no spot label (a model label, as most say), only the nodeSelector
# can pin spot, and only it or a toleration of the spot taint can open it;
# an expression on a spot label takes the general function. lib's spot
# labels and the spot taint's key are written here as literals (a constant
# rule costs an evaluation per review; fast_test.rego holds them equal): a
# replay review went from 1,516 to 1,442 allocations.
fast_spot_placement(spec, selector, affinity) := scheduling.spot_placement(spec) if {
	affinity != null
	affinity.key in {"fleetplane.dev/capacity-type", "karpenter.sh/capacity-type", "eks.amazonaws.com/capacityType", "cloud.google.com/gke-spot"}
} else := {"pins_spot": pins, "opens_spot": opens} if {
	pins := count([k | some k, v in selector; lib.spot_node_labels[k] == v]) > 0

	# Only a toleration of the spot taint's key, or of every key, can
	# tolerate it (scheduling.tolerates); most pods tolerate others only.
	opens := true in {pins, count([t |
		some t in spec.tolerations
		object.get(t, "key", "") in {"", "fleetplane.dev/capacity-type"}
		scheduling.tolerates(t, lib.spot_taint)
	]) > 0}
}

# The pod-seconds of a template (workloads.pod_seconds with the type's default
# runtime, each bound followed by the grace, as budget.rego's pod_seconds), or
# null when nothing bounds them. One run of a pod with no deadline is the
# default runtime and the grace (the product, 1 x fallback, costs OPA about
# 50 allocations).
fast_pod_seconds(t, wall, pod_deadline, fallback, grace) := fallback + grace if {
	wall == null
	pod_deadline == null
	t.runs == 1
	is_number(fallback)
} else := seconds if {
	seconds := workloads.pod_seconds(t.replicas, t.runs, with_grace(wall, grace), t.replaced, with_grace(pod_deadline, grace), with_grace(fallback, grace))
} else := null

# The budget's [denials, warnings] for a workload that costs seconds x
# devices x price (see fast_budget); for one nothing bounds (null seconds),
# the exemption warning when the team is exempt for its type, as the full
# rules give it (unbounded_exempt_warning); undefined otherwise (the full
# rules deny it and say what bound to set).
fast_cost_verdict(seconds, cost, ratios, who) := fast_budget(
	{
		"total_usd": (cost.spent_usd + cost.reserved_usd) + estimate, "spent_usd": cost.spent_usd,
		"reserved_usd": cost.reserved_usd, "estimate_usd": estimate, "budget_usd": cost.budget_usd,
	},
	ratios,
	who.team,
	who.type,
) if {
	is_number(seconds)
	estimate := ((cost.devices * cost.price) * seconds) / 3600
}

fast_cost_verdict(null, _, _, who) := [[], [unbounded_exempt_warning(who.where, who.runs, who.team, who.type)]] if {
	budget.exempt(who.team, who.type)
}

# A pod without accelerators that may land on accelerator nodes: it tolerates
# their taints or selects them (the full rules deny it).
fast_reaches_accelerators(spec, _) if {
	some toleration in spec.tolerations
	some taint in lib.accelerator_taints
	scheduling.tolerates(toleration, taint)
}

fast_reaches_accelerators(_, selector) if {
	some key, _ in selector
	accelerator_node_label(key)
}

# A reserved pool the fast path leaves to the full rules: its teams is not a
# list, or it is reserved for other teams and the pod may land on it (of a
# model it selects, by nodeSelector or among the models fast_model picked,
# among the pools it selects if it does; the full rules also tell capacity
# types apart). The node affinity fast_model reads names no pool label, so
# only the nodeSelector selects pools.
fast_pool_restricts(name, teams, pool, selector, picked, team) if {
	not is_array(teams)
} else if {
	not team in teams
	fast_pool_model_selected(pool.model, selector, picked)
	object.get(selector, lib.keys.pool, name) == name
}

fast_pool_model_selected(model, _, picked) if model in picked

fast_pool_model_selected(model, selector, _) if {
	models := data.fleetplane.config.models
	selector[models[model].node_label] == models[model].label_value
}

# The team's unexpired reservations not of this object (budget.reserved),
# without computing the object's uids when the team has none.
fast_reserved(team, _) := 0 if {
	not data.fleetplane.reservations[team]
} else := budget.reserved(team, now, object_uids) if {
	now := time.now_ns()
}

# The models of the family the pod may land on, as [denials, price per hour,
# models]: by nodeSelector, exactly one label of the family selected, its
# value exactly one known model, allowed for the team; by required node
# affinity (no label of the family in the nodeSelector), an expression `In`
# on a label of the family whose every value names a known model, each
# allowed for the team, priced at the dearest (as the full rules read
# scheduling.label_values and price it: model_choice, price); or no label of
# the family selected and no required node affinity, denied with the full
# rules' message (model_selection_message) and priced as they price it (the
# team's default model, else the family's dearest). Undefined otherwise (the
# full rules explain).
fast_model(r, selector, affinity, team_config, capacity, where) := [[], models[model].price_per_hour_usd[capacity], {model}] if {
	affinity == null
	models := data.fleetplane.config.models
	count({m.node_label | some m in models; m.resource == r; _ = selector[m.node_label]}) == 1
	[model] := [name | some name, m in models; m.resource == r; selector[m.node_label] == m.label_value]
	model in team_config.allowed_models
} else := [[], max(prices), picked] if {
	models := data.fleetplane.config.models
	affinity != null
	key := affinity.key
	family_keys := {m.node_label | some m in models; m.resource == r}
	key in family_keys
	count({k | some k in family_keys; _ = selector[k]}) == 0

	# The models of those values (of any family, as model_choice looks them
	# up), every distinct value naming one, every one allowed.
	picked := {name | some name, m in models; m.node_label == key; m.label_value in affinity.values}
	count({m.label_value | some name in picked; m := models[name]}) == count({v | some v in affinity.values})
	count([name | some name in picked; not name in team_config.allowed_models]) == 0
	prices := [p | some name in picked; p := models[name].price_per_hour_usd[capacity]]
	count(prices) == count(picked)
} else := [[model_selection_message(where, r, keys)], price({"families": {r: {"models": []}}, "capacity": capacity}, r), set()] if {
	affinity == null
	keys := {m.node_label | some m in data.fleetplane.config.models; m.resource == r}
	count(keys) > 0
	count({k | some k in keys; _ = selector[k]}) == 0
}

fast_number_or_null(x) if x == null

fast_number_or_null(x) if is_number(x)

fast_checkpoint_missing(true, true, annotations) if {
	not checkpoint_uri(object.get(annotations, lib.keys.checkpoint_location, null))
}

# The two rules reviews break most often, judged here with the full rules'
# messages (priority_class_message, idle_timeout_message) so that such a
# review is denied without them: [] when the rule holds, [message] when not.
# The queue annotation of an accelerator template (queue.rego): the team's
# queue, or missing (a denial with the full rules' message); any other value
# is left undefined, for the full rules.
fast_queue_denial(annotations, team_config, where) := [] if {
	annotations["scheduling.volcano.sh/queue-name"] == team_config.queue
	is_string(team_config.queue)
	team_config.queue != ""
} else := [queue_annotation_missing_message(where)] if {
	not annotations["scheduling.volcano.sh/queue-name"]
}

fast_priority_denial(spec, classes, where, wt) := [] if {
	spec.priorityClassName in classes
} else := [priority_class_message(where, spec, wt, classes)]

fast_idle_timeout_denial(maximum, annotations, where, wt) := [] if {
	maximum == null
} else := [] if {
	declares_idle_timeout(annotations, maximum)
} else := [idle_timeout_message(wt, where, maximum)]

# The budget's [denials, warnings] as budget.rego gives them (budget_denial,
# budget_warning), from the comparisons of fleetplane.budget.level with the
# lines ratio x budget: none at or under the warning line when it is at or
# under the limit (warn_ratio <= deny_ratio, a budget of at least 0: then the
# total is under both, and the limit, a product of floats that costs OPA ~40
# allocations, is not computed); the exemption warning over the limit for a
# budget-exempt type; the denial over the limit for any other (with those
# lines); the warning between the lines; undefined otherwise (lines the full
# rules should judge).
fast_budget(amounts, ratios, team, wt) := [[], []] if {
	ratios.warn_ratio <= ratios.deny_ratio
	amounts.budget_usd >= 0
	amounts.total_usd <= ratios.warn_ratio * amounts.budget_usd
} else := [[], [budget_warning(object.union(amounts, {"level": "exempt"}), team, wt)]] if {
	amounts.total_usd > ratios.deny_ratio * amounts.budget_usd
	budget.exempt(team, wt)
} else := [[budget_denial(object.union(amounts, {"level": "deny"}), team)], []] if {
	ratios.warn_ratio <= ratios.deny_ratio
	amounts.budget_usd >= 0
	amounts.total_usd > ratios.deny_ratio * amounts.budget_usd
} else := [[], [budget_warning(object.union(amounts, {"level": "warn"}), team, wt)]] if {
	amounts.total_usd > ratios.warn_ratio * amounts.budget_usd
	amounts.total_usd <= ratios.deny_ratio * amounts.budget_usd
}

# The spend document the controller publishes; a missing one means nothing is
# spent (as in fleetplane.budget), anything else but an object takes the full
# rules.
fast_spend := spend if {
	spend := data.fleetplane.spend
	is_object(spend)
} else := {} if {
	not data.fleetplane.spend
}
