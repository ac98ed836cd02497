package fleetplane.admission_test

import data.fleetplane.admission
import data.fleetplane.testing

# The gate's deny set under a patched configuration document.
deny_with_config(rev, config) := result if {
	result := admission.deny with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

allowed_with_config(rev, config) if {
	admission.allowed with input as rev
		with data.fleetplane.config as config
		with data.fleetplane.approvals as testing.approvals
		with data.fleetplane.spend as {}
		with time.now_ns as testing.now_ns
}

without(path) := json.remove(testing.config, [path])

patched(patch) := object.union(testing.config, patch)

config_cases := {
	"type field missing": {
		"config": without("workload_types/training/max_accelerators"),
		"input": testing.pod(testing.training),
		"want": "config: data.fleetplane.config.workload_types.training.max_accelerators must be a number, got null; render the platform configuration into OPA again",
	},
	"capacity of an unknown kind": {
		"config": patched({"workload_types": {"training": {"capacity": "sometimes"}}}),
		"input": testing.pod(testing.training),
		"want": `config: data.fleetplane.config.workload_types.training.capacity must be one of any, spot, on-demand, got "sometimes"; render the platform configuration into OPA again`,
	},
	"priority classes not a list": {
		"config": patched({"workload_types": {"training": {"priority_classes": "fleetplane-training"}}}),
		"input": testing.pod(testing.training),
		"want": `config: data.fleetplane.config.workload_types.training.priority_classes must be a list of strings, got "fleetplane-training"; render the platform configuration into OPA again`,
	},
	"team field missing": {
		"config": without("teams/research/allowed_models"),
		"input": testing.pod(testing.training),
		"want": "config: data.fleetplane.config.teams.research.allowed_models must be a list of strings, got null; render the platform configuration into OPA again",
	},
	"model price missing": {
		"config": without("models/h100-80gb/price_per_hour_usd/on-demand"),
		"input": testing.pod(testing.training),
		"want": `config: data.fleetplane.config.models.h100-80gb.price_per_hour_usd must be {"on-demand": <number>, "spot": <number>}, got {"spot":3.93}; render the platform configuration into OPA again`,
	},
	"approval missing": {
		"config": without("approval"),
		"input": testing.pod(testing.training),
		"want": "config: data.fleetplane.config.approval.threshold_accelerators must be a number, got null; render the platform configuration into OPA again",
	},
	"budget ratios missing": {
		"config": without("budget"),
		"input": testing.pod(testing.training),
		"want": "config: data.fleetplane.config.budget.deny_ratio must be a number, got null; render the platform configuration into OPA again",
	},
	"registries missing": {
		"config": without("registries"),
		"input": testing.pod(testing.cpu),
		"want": "config: data.fleetplane.config.registries must be a list of strings, got null; render the platform configuration into OPA again",
	},
	"no configuration at all": {
		"config": {},
		"input": testing.pod(testing.cpu),
		"want": "config: data.fleetplane.config.namespaces must be a map, got null; render the platform configuration into OPA again",
	},
	"system namespaces missing, outside the teams": {
		"config": without("system_namespaces"),
		"input": testing.pod_in(testing.cpu, "default"),
		"want": "config: data.fleetplane.config.system_namespaces must be a list of strings, got null; render the platform configuration into OPA again",
	},
	"pool reservations missing": {
		"config": without("reserved_pools"),
		"input": testing.pod(testing.training),
		"want": "config: data.fleetplane.config.reserved_pools must be a map, got null; render the platform configuration into OPA again",
	},
	"a pool reservation that is not a list": {
		"config": patched({"reserved_pools": {"h100-spot": "research"}}),
		"input": testing.pod(testing.training),
		"want": `config: data.fleetplane.config.reserved_pools.h100-spot must be a list of strings, got "research"; render the platform configuration into OPA again`,
	},
	"pod security level unknown": {
		"config": patched({"workload_types": {"training": {"pod_security": "lenient"}}}),
		"input": testing.pod(testing.training),
		"want": `config: data.fleetplane.config.workload_types.training.pod_security must be one of baseline, restricted, got "lenient"; render the platform configuration into OPA again`,
	},
	"platform identities missing when a platform key is written": {
		"config": without("platform"),
		"input": testing.pod(testing.with_labels(testing.training, {"fleetplane.dev/exempt": "true"})),
		"want": "config: data.fleetplane.config.platform.controller_service_account must be a string, got null; render the platform configuration into OPA again",
	},
	"namespace mapped to a team without configuration": {
		"config": patched({"namespaces": {"orphan": "ghost"}}),
		"input": testing.pod_in(testing.training, "orphan"),
		"want": "config: data.fleetplane.config.teams.ghost.monthly_budget_usd must be a number, got null; render the platform configuration into OPA again",
	},
}

test_incomplete_configuration_is_denied[name] if {
	some name, tc in config_cases
	tc.want in deny_with_config(tc.input, tc.config)
	not allowed_with_config(tc.input, tc.config)
}

test_configuration_document_that_is_not_an_object_is_empty if {
	admission.config_document == {} with data.fleetplane.config as "broken"
}

test_an_unused_model_does_not_block_others if {
	config := without("models/tpu-v5e/price_per_hour_usd/spot")
	allowed_with_config(testing.pod(testing.training), config)
}

test_team_namespaces_need_no_system_list if {
	allowed_with_config(testing.pod(testing.cpu), without("system_namespaces"))
}

test_a_null_default_runtime_is_configuration if {
	admission.conforms(null, "number or null")
	not "config" in {split(m, ":")[0] | some m in deny_with_config(testing.pod(testing.training), patched({"workload_types": {"training": {"default_max_runtime_seconds": null}}}))}
}

test_cpu_pods_need_no_accelerator_configuration if {
	config := without("workload_types")
	deny_with_config(testing.pod(testing.cpu), config) == set()
	allowed_with_config(testing.pod(testing.cpu), config)
}

test_fixture_configuration_is_complete[name] if {
	some name, rev in {"training": testing.pod(testing.training), "notebook": testing.pod(testing.notebook), "batch": testing.pod(testing.batch)}
	every m in deny(rev) {
		not startswith(m, "config:")
	}
}

test_nullable_idle_timeout_accepts_null_and_numbers if {
	admission.conforms(null, "number or null")
	admission.conforms(3600, "number or null")
	not admission.conforms("1h", "number or null")
	admission.conforms({"a": 1}, "map")
	admission.conforms(true, "boolean")
	admission.conforms("a", "string")
}
