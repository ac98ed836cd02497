# Policy data checks: The gate never guesses a number: when the part of
# data.fleetplane.config a request needs is missing or of the wrong type, the
# request is denied with the path of the field, instead of being judged by
# rules that would see nothing and so allow.
package fleetplane.admission

import data.fleetplane.config
import data.fleetplane.lib.workloads

type_schema := {
	"max_accelerators": "number",
	"capacity": "capacity",
	"priority_classes": "strings",
	"default_max_runtime_seconds": "number or null",
	"checkpoint_required_on_spot": "boolean",
	"budget_exempt": "boolean",
	"max_idle_timeout_seconds": "number or null",
	"pod_security": "pod security level",
}

pool_schema := {
	"model": "string",
	"capacity_type": "capacity type",
}

platform_schema := {
	"controller_service_account": "string",
	"workload_controllers": "strings",
	"admin_groups": "strings",
}

team_schema := {
	"monthly_budget_usd": "number",
	"allowed_models": "strings",
	"default_model": "string",
	"budget_exempt_types": "strings",
}

model_schema := {
	"resource": "string",
	"node_label": "string",
	"label_value": "string",
	"price_per_hour_usd": "prices",
}

conforms(value, "number") if is_number(value)

conforms(value, "string") if is_string(value)

conforms(value, "boolean") if is_boolean(value)

conforms(value, "number or null") if is_number(value)

conforms(null, "number or null")

conforms(value, "capacity") if value in {"any", "spot", "on-demand"}

conforms(value, "capacity type") if value in {"spot", "on-demand"}

conforms(value, "pod security level") if value in {"baseline", "restricted"}

conforms(value, "strings") if {
	is_array(value)
	every v in value {
		is_string(v)
	}
}

conforms(value, "prices") if {
	is_number(value["on-demand"])
	is_number(value.spot)
}

conforms(value, "map") if is_object(value)

# Fields each kind of request needs, as [path, schema type].
needed_fields contains [["namespaces"], "map"] if mode != "none"

needed_fields contains [["system_namespaces"], "strings"] if {
	mode != "none"
	not in_team_namespace
}

needed_fields contains [["registries"], "strings"] if {
	mode in {"full", "changes"}
	not namespace_class == "system"
}

needed_fields contains [["platform", field], kind] if {
	platform_consulted
	some field, kind in platform_schema
}

needed_fields contains [["pools"], "map"] if holding_judged

needed_fields contains [["pools", name, field], kind] if {
	holding_judged
	some name, _ in workloads.as_object(config.pools)
	some field, kind in pool_schema
}

needed_fields contains [["reserved_pools"], "map"] if holding_judged

needed_fields contains [["reserved_pools", name], "strings"] if {
	holding_judged
	some name, _ in workloads.as_object(config.reserved_pools)
}

needed_fields contains [["workload_types"], "map"] if holding_judged

needed_fields contains [["teams"], "map"] if holding_judged

needed_fields contains [["models"], "map"] if holding_judged

needed_fields contains [["approval", "threshold_accelerators"], "number"] if holding_judged

needed_fields contains [["workload_types", workload_type, field], kind] if {
	holding_judged
	some field, kind in type_schema
}

needed_fields contains [["teams", team, field], kind] if {
	holding_judged
	team
	some field, kind in team_schema
}

needed_fields contains [["models", name, field], kind] if {
	holding_judged
	some name, _ in workloads.as_object(config.models)
	some field, kind in model_schema
}

needed_fields contains [["budget", field], "number"] if {
	budget_checked
	some field in ["warn_ratio", "deny_ratio"]
}

# METADATA
# description: >-
#   True when the configuration fields that could otherwise let a rule fail
#   open have the right type: one rule on the common path. Fields the gate
#   needs positively (prices, budgets, runtimes, ratios) are not repeated
#   here: without them the review is not evaluated and so refused. The
#   detailed check below names every bad field whenever either fails.
default config_ok := false

config_ok if mode == "none"

config_ok if {
	mode != "none"
	is_object(config.namespaces)
	namespace_classified
	registries_ok
	accelerator_config_ok
	platform_ok
}

platform_ok if not platform_consulted

platform_ok if {
	is_string(config.platform.controller_service_account)
	is_array(config.platform.workload_controllers)
	is_array(config.platform.admin_groups)
}

# A review without a namespace (a cluster-scoped kind) is not classified;
# one with a namespace must be.
namespace_classified if not namespace

namespace_classified if namespace_class

registries_ok if not mode in {"full", "changes"}

registries_ok if is_array(config.registries)

accelerator_config_ok if not holding_judged

accelerator_config_ok if {
	holding_judged
	is_number(type_config.max_accelerators)
	type_config.capacity in {"any", "spot", "on-demand"}
	is_array(type_config.priority_classes)
	is_boolean(type_config.checkpoint_required_on_spot)
	number_or_null(type_config.max_idle_timeout_seconds)
	type_config.pod_security in {"baseline", "restricted"}
	is_array(team_config.allowed_models)
	is_number(config.approval.threshold_accelerators)
	is_object(config.pools)
	is_object(config.reserved_pools)
	count([teams | some teams in config.reserved_pools; is_array(teams)]) == count(config.reserved_pools)
}

# The platform's identities are read when the request writes a key only the
# platform may write, or creates a PodGroup.
platform_consulted if count(owned_writes) > 0

platform_consulted if mode == "podgroup"

number_or_null(x) if is_number(x)

number_or_null(null)

config_suspect if not config_ok

config_suspect if not evaluated

deny contains msg if {
	config_suspect
	some [path, kind] in needed_fields
	not conforms(object.get(config_document, path, null), kind)
	msg := sprintf(
		"config: data.fleetplane.config.%s must be %s, got %s; render the platform configuration into OPA again",
		[concat(".", path), kind_descriptions[kind], json.marshal(object.get(config_document, path, null))],
	)
}

kind_descriptions := {
	"number": "a number",
	"string": "a string",
	"boolean": "a boolean",
	"number or null": "a number or null",
	"capacity": "one of any, spot, on-demand",
	"capacity type": "one of spot, on-demand",
	"pod security level": "one of baseline, restricted",
	"strings": "a list of strings",
	"prices": "{\"on-demand\": <number>, \"spot\": <number>}",
	"map": "a map",
}

# The configuration document, or an empty one when it is missing.
config_document := doc if {
	doc := data.fleetplane.config
	is_object(doc)
} else := {}
