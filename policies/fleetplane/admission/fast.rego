# Fast path: Most reviews the gate sees are the common case: a well-formed
# CREATE of one pod template with app containers only, selected by
# nodeSelector. fast_response answers such a review in two rules over the
# request (fast_base, fast_verdict), where the explaining rules derive every
# fact, place and message: allowed, with the budget warnings the full rules
# would give, or denied when it breaks only the rules reviews break most often
# (image registry, no model selected, priority class, idle timeout), with the
# full rules' messages from the same functions. Whenever it cannot decide
# (anything unusual: init containers, MIG slices, node affinity, several
# templates, two accelerator families, an update, any other rule that might
# fire), it is undefined and system.main answers from the full rules, which
# decide and explain. So it may be undefined where the full rules answer, and
# where it answers it must give their very response: fast_test.rego and
# tests/policies/test_fast_path.py check exactly that on every fixture, the
# review corpus, the trace and mutations of them.
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
#   containers pass the security rules but the registry one (in team
#   namespaces): namespace, where (the template's place, for messages),
#   denials (of images from registries that are not allowed), spec, selector,
#   labels, annotations, replicas, deadline (the bounding positive deadline,
#   or null), resources (the whole-device accelerator resources the limits
#   name), counts (the device counts of those limits) and limits (one entry
#   per accelerator limit). Undefined when anything is outside the common
#   case.
fast_base := {
	"namespace": ns,
	"where": where,
	"denials": image_denials,
	"spec": spec,
	"selector": selector,
	"labels": labels,
	"annotations": annotations,
	"replicas": replicas,
	"deadline": fast_deadline(deadline, object.get(spec, "activeDeadlineSeconds", null)),
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
	namespaces := data.fleetplane.config.namespaces
	is_object(namespaces)

	# One template of a gated kind.
	[where, template, replicas, deadline] := fast_template(request.kind, obj)
	is_object(template)
	spec := template.spec
	is_object(spec)
	containers := spec.containers
	is_array(containers)
	count(containers) > 0
	object.get(spec, "initContainers", []) == []
	object.get(spec, "ephemeralContainers", []) == []
	is_array(object.get(spec, "tolerations", []))
	volumes := object.get(spec, "volumes", [])
	is_array(volumes)
	selector := object.get(spec, "nodeSelector", {})
	is_object(selector)
	object.get(spec, ["affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"], null) == null
	metadata := object.get(template, "metadata", {})
	labels := object.get(metadata, "labels", {})
	is_object(labels)
	annotations := object.get(metadata, "annotations", {})
	is_object(annotations)
	is_number(replicas)
	replicas >= 0
	replicas == floor(replicas)

	# Containers: well formed; no MIG slices (the full rules handle those);
	# every accelerator request has a limit and equals it. One pass, keeping
	# each container's accelerator limits.
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
		not strings.any_prefix_match(object.keys(object.union(limits, requests)), mig)
		object.subset(limits, object.filter(requests, whole))
	]
	count(accelerators) == count(containers)

	image_denials := fast_image_denials(namespaces, ns, where, spec, containers, volumes)
}

# The template of a Pod or of a workload controller's spec.template as
# [where, template, replicas, deadline] (workloads.templates, without its
# general dispatch); the other gated kinds but Volcano Jobs through
# `templates`, when they have one.
fast_template(kind, obj) := ["pod", obj, 1, null] if {
	kind.kind == "Pod"
	kind.group == ""
} else := ["spec.template", obj.spec.template, object.get(obj.spec, "replicas", 1), null] if {
	kind.group == "apps"
	kind.kind in {"Deployment", "StatefulSet", "ReplicaSet"}
} else := [t.where, t.template, t.replicas, t.deadline] if {
	# Volcano Jobs take the full rules, which also check their queue.
	kind_class != "volcano"
	[t] := templates
}

# METADATA
# description: >-
#   The security rules: outside team namespaces (mapped to nothing or to
#   false) there are none; inside (mapped to any other value, null included,
#   as the full rules see them), nothing may be privileged, share host
#   namespaces or mount hostPath volumes, and each image from a registry that
#   is not allowed is denied with the full rules' message (image_registry_message).
#   Undefined when a rule other than the registry one would fire, or the
#   registries are configured in a way the fast path does not read.
fast_image_denials(namespaces, ns, where, spec, containers, volumes) := [] if {
	not namespaces[ns]
} else := denials if {
	not spec.hostNetwork
	not spec.hostPID
	not spec.hostIPC
	not fast_mounts_host_path(volumes)
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

fast_privileged(containers) if {
	some c in containers
	c.securityContext.privileged
}

fast_mounts_host_path(volumes) if {
	some volume in volumes
	volume.hostPath
}

# The positive whole deadline that bounds the pods (the shorter of the
# template's and the pod spec's), null when there is none; undefined when one
# is not a positive whole number.
fast_deadline(a, b) := null if {
	a == null
	b == null
} else := b if {
	a == null
	fast_positive_whole(b)
} else := a if {
	b == null
	fast_positive_whole(a)
} else := min({a, b}) if {
	fast_positive_whole(a)
	fast_positive_whole(b)
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
#   warning); over the limit otherwise is a denial, for the full rules.
#   Undefined when the fast path cannot decide.
fast_verdict := {"denials": fast_base.denials, "warnings": []} if {
	fast_base.limits == []
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
	is_array(approval.approved_ids)

	# Size: under the type's limit and the approval threshold; no nodeName.
	total := b.replicas * devices
	total <= tc.max_accelerators
	total < approval.threshold_accelerators
	object.get(spec, "nodeName", "") == ""

	# Capacity: where the pod may run, as the full rules see it.
	placement := scheduling.spot_placement(spec)
	pins := placement.pins_spot
	opens := placement.opens_spot
	{"any": true, "on-demand": opens == false, "spot": pins}[tc.capacity] == true
	capacity := {true: "spot", false: "on-demand"}[pins]
	not fast_checkpoint_missing(tc.checkpoint_required_on_spot, opens, b.annotations)

	# Model: one allowed model selected, or none (a denial); its price.
	[model_denials, price] := fast_model(r, b.selector, team_config, capacity, b.where)
	is_number(price)

	# The rules reviews break most often, with the full rules' messages.
	denials := array.concat(
		array.concat(b.denials, model_denials),
		array.concat(
			fast_priority_denial(spec, tc.priority_classes, b.where, wt),
			fast_idle_timeout_denial(max_idle, b.annotations, b.where, wt),
		),
	)

	# Budget: this month's spend plus the estimate at or under both lines.
	month := budget.month(time.now_ns())
	record := object.get(fast_spend, team, {"month": month, "usd": 0})
	is_string(record.month)
	spent := {true: record.usd, false: 0}[record.month == month]
	is_number(spent)
	spent >= 0
	seconds := fast_or(b.deadline, tc.default_max_runtime_seconds)
	estimate := ((total * price) * seconds) / 3600
	limit := team_config.monthly_budget_usd
	is_number(limit)
	is_number(cfg.budget.warn_ratio)
	is_number(cfg.budget.deny_ratio)
	warnings := fast_budget_warnings(
		{"total_usd": spent + estimate, "spent_usd": spent, "estimate_usd": estimate, "budget_usd": limit},
		cfg.budget,
		team,
		wt,
	)
}

# The model of the family the nodeSelector picks, as [denials, price per
# hour]: exactly one label of the family selected, its value exactly one known
# model, allowed for the team; or no label of the family selected, denied with
# the full rules' message (model_selection_message) and priced as they price
# it (the team's default model, else the family's dearest). Undefined
# otherwise (the full rules explain).
fast_model(r, selector, team_config, capacity, where) := [[], models[model].price_per_hour_usd[capacity]] if {
	models := data.fleetplane.config.models
	count({m.node_label | some m in models; m.resource == r; _ = selector[m.node_label]}) == 1
	[model] := [name | some name, m in models; m.resource == r; selector[m.node_label] == m.label_value]
	model in team_config.allowed_models
} else := [[model_selection_message(where, r, keys)], price({"families": {r: {"models": []}}, "capacity": capacity}, r)] if {
	keys := {m.node_label | some m in data.fleetplane.config.models; m.resource == r}
	count(keys) > 0
	count({k | some k in keys; _ = selector[k]}) == 0
}

fast_number_or_null(x) if x == null

fast_number_or_null(x) if is_number(x)

fast_or(null, otherwise) := otherwise

fast_or(x, _) := x if x != null

fast_checkpoint_missing(true, true, annotations) if {
	not checkpoint_uri(object.get(annotations, lib.keys.checkpoint_location, null))
}

# The two rules reviews break most often, judged here with the full rules'
# messages (priority_class_message, idle_timeout_message) so that such a
# review is denied without them: [] when the rule holds, [message] when not.
fast_priority_denial(spec, classes, where, wt) := [] if {
	spec.priorityClassName in classes
} else := [priority_class_message(where, spec, wt, classes)]

fast_idle_timeout_denial(maximum, annotations, where, wt) := [] if {
	maximum == null
} else := [] if {
	declares_idle_timeout(annotations, maximum)
} else := [idle_timeout_message(wt, where, maximum)]

# The budget warnings of budget.rego (budget_warning), from the comparisons of
# fleetplane.budget.level with the lines ratio x budget: none at or under the
# warning line when it is at or under the limit (warn_ratio <= deny_ratio, a
# budget of at least 0: then the total is under both, and the limit, a product
# of floats that costs OPA ~40 allocations, is not computed); the exemption
# warning over the limit for a budget-exempt type; the warning between the
# lines; undefined otherwise (a denial, or lines the full rules should judge).
fast_budget_warnings(amounts, ratios, team, wt) := [] if {
	ratios.warn_ratio <= ratios.deny_ratio
	amounts.budget_usd >= 0
	amounts.total_usd <= ratios.warn_ratio * amounts.budget_usd
} else := [budget_warning(object.union(amounts, {"level": "exempt"}), team, wt)] if {
	amounts.total_usd > ratios.deny_ratio * amounts.budget_usd
	budget.exempt(team, wt)
} else := [budget_warning(object.union(amounts, {"level": "warn"}), team, wt)] if {
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
