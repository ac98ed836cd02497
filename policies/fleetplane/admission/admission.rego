# METADATA
# title: Admission gate
# description: >-
#   Judges an admission.k8s.io/v1 AdmissionReview for Pods and every object
#   carrying pod templates (the workload kinds it knows, and any other kind by
#   the shape of its templates), the scale subresource, HorizontalPodAutoscalers
#   and Volcano PodGroups, in every namespace but the platform's own.
#   deny is the set of messages, one per violated rule and place, each starting
#   with the rule's name and saying what to change; warnings are admitted with
#   the workload. This file reads the request and derives the facts the rules
#   share; the rules live beside it, one concern per file.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib
import data.fleetplane.lib.claims
import data.fleetplane.lib.workloads

# METADATA
# description: >-
#   Allowed only on positive evidence: a well-formed review, every fact the
#   rules need evaluated, and no deny message.
default allowed := false

allowed if {
	envelope_ok
	config_ok
	evaluated
	count(deny) == 0
}

# METADATA
# description: The request uid, echoed in the response; empty when the review has none.
uid := u if {
	u := input.request.uid
	is_string(u)
} else := ""

# METADATA
# description: Admission warnings, sorted.
warning_list := sort([w | some w in warnings])

# METADATA
# description: Deny messages, sorted.
deny_list := sort([m | some m in deny])

# envelope_ok is derived for every review (allowed reads it); testing it first
# spares the common path the evaluation of envelope_problems.
deny contains sprintf("malformed-request: %s", [msg]) if {
	not envelope_ok
	some msg in envelope_problems
}

deny contains sprintf("malformed-request: %s", [msg]) if {
	mode in {"full", "changes", "holding"}
	not shapes_ok
	some msg in workloads.shape_problems(input.request.object, kind_class)
}

# METADATA
# description: >-
#   The messages of the response: the deny messages, or, when the review is
#   refused without one (a fact the rules need could not be derived), a
#   message saying so, so that a refusal always explains itself.
messages := deny_list if {
	count(deny_list) > 0
} else := [unevaluated_message] if {
	not allowed
} else := []

unevaluated_message := "unevaluated: the gate could not derive every fact it needs from this object and the policy data, so it refuses it; check the object and data.fleetplane.config"

# ---------------------------------------------------------------- envelope

operations := {"CREATE", "UPDATE", "DELETE", "CONNECT"}

# The envelope is checked with one rule on the common path; the problems are
# only listed when it fails. Negation only ever applies to rules without
# arguments or to equality, so a missing field makes a check fail, never vanish.
# The checks are written out here (each rule referenced costs OPA a rule
# evaluation): they are those of valid_uid, valid_kind, valid_operation,
# object_present and namespace_present below, which name the problems; the
# envelope tests fail if the two disagree.
envelope_ok if {
	input.apiVersion == "admission.k8s.io/v1"
	input.kind == "AdmissionReview"
	is_string(input.request.uid)
	input.request.uid != ""
	is_string(object.get(input.request.kind, "group", ""))
	is_string(input.request.kind.kind)
	input.request.kind.kind != ""
	input.request.operation in operations
	true in {input.request.operation in {"DELETE", "CONNECT"}, is_object(object.get(input.request, "object", null))}
	true in {mode == "none", count([1 | namespace]) == 1}
}

object_present if not writes

writes if input.request.operation in {"CREATE", "UPDATE"}

object_present if has_object

namespace_present if mode == "none"

namespace_present if namespace

envelope_problems := set() if {
	envelope_ok
} else := problems if {
	problems := {msg | some msg, failed in envelope_checks; failed}
}

envelope_checks := {
	"the body must be an AdmissionReview object": not_a_body,
	"apiVersion must be admission.k8s.io/v1": bad_api_version,
	"kind must be AdmissionReview": bad_kind,
	"request is missing": no_request,
	"request.uid must be a non-empty string": bad_uid,
	"request.kind must be {group, version, kind}": bad_kind_field,
	"request.operation must be one of CONNECT, CREATE, DELETE, UPDATE": bad_operation,
	"request.object must be the object under review": no_object,
	"request.namespace is missing": no_namespace,
}

default not_a_body := false

not_a_body if not body_is_object

default bad_api_version := false

bad_api_version if {
	body_is_object
	not input.apiVersion == "admission.k8s.io/v1"
}

default bad_kind := false

bad_kind if {
	body_is_object
	not input.kind == "AdmissionReview"
}

default no_request := false

no_request if {
	body_is_object
	not has_request
}

default bad_uid := false

bad_uid if {
	has_request
	not valid_uid
}

default bad_kind_field := false

bad_kind_field if {
	has_request
	not valid_kind
}

default bad_operation := false

bad_operation if {
	has_request
	not valid_operation
}

default no_object := false

no_object if {
	has_request
	not object_present
}

default no_namespace := false

no_namespace if not namespace_present

body_is_object if is_object(input)

has_request if is_object(input.request)

valid_uid if {
	is_string(input.request.uid)
	input.request.uid != ""
}

# The core group may be sent as "" or left out.
valid_kind if {
	is_string(object.get(input.request.kind, "group", ""))
	is_string(input.request.kind.kind)
	input.request.kind.kind != ""
}

valid_operation if input.request.operation in operations

has_object if is_object(input.request.object)

# ------------------------------------------------------------------ scope

# The rules read input.request directly: a rule naming it would cost OPA a
# rule evaluation on every review, fast path included.
# workloads.workload_class, written out: a function call fewer on every review.
kind_class := class if {
	class := workloads.kind_class(input.request.kind)
	class != "rayjob"
} else := "rayjob" if {
	# A RayJob that submits to an existing cluster (clusterSelector) without
	# a submitter template of its own holds nothing the gate judges.
	workloads.kind_class(input.request.kind) == "rayjob"
	count(workloads.templates(input.request.object, "rayjob")) > 0
} else := "generic" if {
	count(workloads.discovered_templates(input.request.object)) > 0
}

# METADATA
# description: >-
#   What the gate checks. "none" in the platform's own namespaces
#   (config.system_namespaces) and for what holds nothing (DELETE, CONNECT,
#   status and other subresources, kinds without pod templates); "scale" on an
#   UPDATE of a scale subresource (the resulting holding of the parent);
#   "full" on CREATE of every kind with pod templates and on UPDATE of a
#   workload (not a Pod) whose pod templates change; "holding" on an UPDATE
#   of a workload whose spec changes but not its templates (replicas,
#   parallelism, concurrency: what it holds, judged when that grows; its
#   templates were judged when they were written, so a workload admitted
#   under older rules can still be scaled down or suspended); "metadata" on
#   an UPDATE of a workload that changes only its metadata (who may write
#   the platform's labels and annotations); "changes" on UPDATE of a Pod (also its
#   ephemeralcontainers and resize subresources), judged for what it changes;
#   "podgroup" and "autoscaler" on CREATE and UPDATE of Volcano PodGroups and
#   HorizontalPodAutoscalers; "disruption" on CREATE and UPDATE of
#   PodDisruptionBudgets (disruption.rego); "metadata" too on CREATE and UPDATE of a
#   runtime (lib/workloads/runtime.rego). One else chain: the cases exclude each other,
#   and OPA stops at the first that holds.
mode := "none" if {
	system_namespace
} else := "metadata" if {
	# Runtimes hold nothing; only who writes the platform's keys in them is
	# judged (lib/workloads/runtime.rego).
	kind_class == "runtime"
	input.request.operation in {"CREATE", "UPDATE"}
	object.get(input.request, "subResource", "") == ""
} else := "full" if {
	kind_class
	input.request.operation == "CREATE"
	object.get(input.request, "subResource", "") == ""
} else := "scale" if {
	input.request.operation == "UPDATE"
	input.request.subResource == "scale"
} else := "full" if {
	kind_class != "pod"
	input.request.operation == "UPDATE"
	object.get(input.request, "subResource", "") == ""
	templates_changed
} else := "holding" if {
	kind_class != "pod"
	input.request.operation == "UPDATE"
	object.get(input.request, "subResource", "") == ""
	spec_changed
} else := "metadata" if {
	kind_class != "pod"
	input.request.operation == "UPDATE"
	object.get(input.request, "subResource", "") == ""
} else := "changes" if {
	kind_class == "pod"
	input.request.operation == "UPDATE"
	object.get(input.request, "subResource", "") in {"", "ephemeralcontainers", "resize"}
} else := "podgroup" if {
	[object.get(input.request.kind, "group", ""), input.request.kind.kind] == ["scheduling.volcano.sh", "PodGroup"]
	input.request.operation in {"CREATE", "UPDATE"}
	object.get(input.request, "subResource", "") == ""
} else := "autoscaler" if {
	[object.get(input.request.kind, "group", ""), input.request.kind.kind] == ["autoscaling", "HorizontalPodAutoscaler"]
	input.request.operation in {"CREATE", "UPDATE"}
	object.get(input.request, "subResource", "") == ""
} else := "disruption" if {
	[object.get(input.request.kind, "group", ""), input.request.kind.kind] == ["policy", "PodDisruptionBudget"]
	input.request.operation in {"CREATE", "UPDATE"}
	object.get(input.request, "subResource", "") == ""
} else := "none"

# An update that leaves the spec as it was (labels, annotations, finalizers,
# owner references) adds nothing the workload rules judge.
spec_changed if input.request.object.spec != object.get(workloads.as_object(input.request.oldObject), "spec", null)

templates_changed if [t.template | some t in templates] != [t.template | some t in old_templates]

# The pod templates of the object before the update.
old_templates := with_lifetime(workloads.templates(workloads.as_object(input.request.oldObject), kind_class), workloads.as_object(input.request.oldObject))

# METADATA
# description: >-
#   Devices the workload held at once before the update (as total_devices).
old_total_devices := sum([n | some t in old_templates; f := fact(t); n := f.replicas * f.devices])

namespace := ns if {
	ns := input.request.namespace
	is_string(ns)
	ns != ""
} else := ns if {
	ns := input.request.object.metadata.namespace
	is_string(ns)
	ns != ""
}

# METADATA
# description: The team owning the namespace; undefined outside team namespaces.
team := config.namespaces[namespace]

team_config := config.teams[team]

in_team_namespace if team

# METADATA
# description: >-
#   "team" for a team's namespace, "system" for one of the platform's own
#   (config.system_namespaces, a reviewed list: nothing there is judged),
#   "other" for any other namespace (judged, and without a team, so it may
#   not use accelerators). Undefined while the list is missing, so such a
#   review is refused (config).
namespace_class := "team" if {
	in_team_namespace
} else := "system" if {
	namespace in config.system_namespaces
} else := "other" if {
	is_array(config.system_namespaces)
}

# A namespace of the platform's own (as namespace_class says, without
# deriving the class of a team namespace: the test fails at its first
# lookup there).
system_namespace if {
	not config.namespaces[namespace]
	namespace in config.system_namespaces
}

# Every namespace but the platform's own is judged.
judged_namespace if namespace_class in {"team", "other"}

# METADATA
# description: >-
#   The user or service account the API server says made the request; empty
#   when the review names none.
requester := u if {
	u := input.request.userInfo.username
	is_string(u)
} else := ""

# ------------------------------------------------------------------ facts

# With what their controllers add over their life (lifetime.rego).
templates := with_lifetime(workloads.templates(input.request.object, kind_class), input.request.object)

# METADATA
# description: >-
#   One entry per pod template, derived once and read by every rule: where
#   (for messages), labels, annotations, spec, replicas (pods running at
#   once), deadline (the shortest deadline, seconds or null), wall (the
#   workload's own deadline or null), pod_deadline (the pod's or null), runs,
#   replaced, bounded and bound (see workloads.templates), entries (the
#   containers with their accelerator quantities), demand (devices per
#   accelerator resource of one pod), devices (their sum), well_formed and
#   quantities_ok.
facts := [fact(t) | some t in templates]

fact(t) := {
	"where": t.where,
	"labels": object.get(metadata, "labels", {}),
	"annotations": object.get(metadata, "annotations", {}),
	"spec": spec,
	"replicas": array.concat([n | n := t.replicas; is_number(n); n >= 0; n == floor(n)], [0])[0],
	"deadline": array.concat(sort(deadlines), [null])[0],
	"wall": array.concat([d | d := t.deadline; workloads.positive_whole(d)], [null])[0],
	"pod_deadline": array.concat([d | d := object.get(spec, "activeDeadlineSeconds", null); workloads.positive_whole(d)], [null])[0],
	"runs": t.runs,
	"replaced": t.replaced,
	"bounded": t.bounded,
	"bound": t.bound,
	"entries": entries,
	"demand": demand,
	"devices": sum([n | some n in demand]),
	"well_formed": workloads.template_ok(t, entries),
	"quantities_ok": workloads.quantities_ok(entries),
} if {
	metadata := object.get(t.template, "metadata", {})

	# DRA claims count as the GPU class's devices, their product as a model
	# selection (lib/dra_claims.rego, dra_claims.rego).
	spec := claims.with_claimed_model(object.get(t.template, "spec", {}), claim_records)
	entries := workloads.containers(spec)
	demand := claims.with_claims(workloads.demand(entries), spec, claim_records)

	# The positive whole deadlines that bound the pods; the shortest applies.
	deadlines := {d |
		some d in [t.deadline, object.get(spec, "activeDeadlineSeconds", null)]
		is_number(d)
		d > 0
		d == floor(d)
	}
}

# The shape of the object is checked per template on the common path; the
# problems are only listed when a template is not well formed.
shapes_ok if {
	count(templates) > 0
	count(facts) == count(templates)
	every f in facts {
		f.well_formed
	}
}

# METADATA
# description: Devices the whole workload holds at once (all templates and replicas).
total_devices := sum([n | some f in facts; n := f.replicas * f.devices])

# METADATA
# description: >-
#   True when any pod of the workload asks for an accelerator (even with zero
#   replicas, so the workload is judged before it is scaled up).
accelerator_workload if {
	some f in facts
	count(f.demand) > 0
}

# METADATA
# description: The workload type shared by every pod template; undefined unless exactly one.
workload_type := only if {
	# Every template labelled, and no label other than the first one's:
	# counting comprehensions, which OPA evaluates for less than every.
	labelled := [t | some f in facts; t := f.labels[lib.keys.workload_type]]
	count(labelled) == count(facts)
	only := labelled[0]
	count([t | some t in labelled; t != only]) == 0
	_ = config.workload_types[only]
}

type_config := config.workload_types[workload_type]

# METADATA
# description: >-
#   Every fact the rules use was derived (positive evidence that the rules
#   saw the object). Trivially true when nothing is gated.
default evaluated := false

evaluated if mode == "none"

# The modes without pod templates read single fields; their rules fail
# closed on their own (a missing field denies).
evaluated if mode in {"metadata", "podgroup", "autoscaler", "disruption"}

evaluated if {
	mode == "scale"
	scale_evaluated
}

evaluated if {
	derived
	not holding_judged
}

evaluated if {
	derived
	holding_judged
	is_object(type_config)
	is_object(team_config)
	budget_evaluated
}

# shapes_ok holds only when every template gave a fact.
derived if {
	mode in {"full", "changes", "holding"}
	shapes_ok
	is_number(total_devices)
}

# METADATA
# description: The current time; the budget uses it to pick this month's spend.
now_ns := time.now_ns()
