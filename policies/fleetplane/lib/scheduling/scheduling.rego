# METADATA
# title: Scheduling constraints
# description: >-
#   Reads where a pod spec can be scheduled: the node label values it is
#   pinned to (nodeSelector and required node affinity), spot selection and
#   spot tolerations. Functions take the pod spec.
package fleetplane.lib.scheduling

import data.fleetplane.lib

# METADATA
# description: >-
#   Required node affinity terms (ORed by Kubernetes); empty when the pod has
#   none.
required_terms(spec) := terms if {
	terms := spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms
	is_array(terms)
	count(terms) > 0
} else := []

# METADATA
# description: >-
#   The values of node label key the pod can land on: the nodeSelector value,
#   or the union of the In values of every required affinity term when every
#   term constrains the key with In. Undefined when the pod leaves the key
#   open (the pod could then land on any value).
label_values(spec, key) := {value} if value := spec.nodeSelector[key]

label_values(spec, key) := values if {
	not spec.nodeSelector[key]
	terms := required_terms(spec)
	count(terms) > 0
	every term in terms {
		term_constrains(term, key)
	}
	values := {v |
		some term in terms
		some e in term.matchExpressions
		e.key == key
		e.operator == "In"
		some v in e.values
	}
}

term_constrains(term, key) if {
	some e in term.matchExpressions
	e.key == key
	e.operator == "In"
}

# METADATA
# description: >-
#   Where a pod spec may run, computed once per template: pins_spot (the pod
#   can only run on spot nodes: a spot node selector, or every required
#   affinity term pins a spot label to its spot value) and opens_spot (the
#   pod asks for spot in any way: it pins spot, an affinity term admits a spot
#   value, or it tolerates the spot taint). One function with the checks
#   inline: the gate calls it for every template, and each call costs OPA far
#   more than an inline expression. The first branch is the common case (no
#   required affinity): only a spot node selector can pin spot then, and only
#   it or a toleration of the spot taint can open it, so the general branch's
#   empty loops are skipped. The node selector is walked rather than the spot
#   labels: it holds fewer entries.
spot_placement(spec) := {"pins_spot": pins, "opens_spot": opens} if {
	object.get(spec, ["affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution", "nodeSelectorTerms"], []) == []
	spot := lib.spot_node_labels
	pins := count([k | some k, v in spec.nodeSelector; spot[k] == v]) > 0
	opens := true in {pins, count([t | some t in spec.tolerations; tolerates(t, lib.spot_taint)]) > 0}
} else := {"pins_spot": pins, "opens_spot": opens} if {
	terms := required_terms(spec)
	selector_pins := count([k | some k, v in lib.spot_node_labels; spec.nodeSelector[k] == v]) > 0
	pinning_terms := count([i |
		some i, term in terms
		count([e |
			some e in term.matchExpressions
			e.operator == "In"
			spot := lib.spot_node_labels[e.key]
			count(e.values) > 0
			every v in e.values {
				v == spot
			}
		]) > 0
	])
	pins := true in {selector_pins, [count(terms) > 0, pinning_terms == count(terms)] == [true, true]}
	admits := count([e |
		some term in terms
		some e in term.matchExpressions
		e.operator == "In"
		lib.spot_node_labels[e.key] in e.values
	]) > 0
	tolerated := count([t | some t in spec.tolerations; tolerates(t, lib.spot_taint)]) > 0
	opens := true in {pins, admits, tolerated}
}

# METADATA
# description: True when the pod can only run on spot nodes (see spot_placement).
pins_spot(spec) if spot_placement(spec).pins_spot

# METADATA
# description: True when the pod asks for spot in any way (see spot_placement).
opens_spot(spec) if spot_placement(spec).opens_spot

# METADATA
# description: >-
#   True when a toleration matches a taint (Kubernetes matching rules): the
#   effect is empty or the taint's, and either the key is empty with
#   Exists, or the key is the taint's with Exists, or with Equal (the
#   default operator) and the taint's value.
tolerates(toleration, taint) if {
	object.get(toleration, "effect", "") in {"", taint.effect}
	key := object.get(toleration, "key", "")
	operator := object.get(toleration, "operator", "Equal")
	true in {
		[key, operator] == ["", "Exists"],
		[key, operator] == [taint.key, "Exists"],
		[key, operator, object.get(toleration, "value", "")] == [taint.key, "Equal", taint.value],
	}
}
