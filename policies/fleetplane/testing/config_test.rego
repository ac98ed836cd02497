# Generated from policyreview/corpus/config.json by tests/policies/config_fixture.py; do not
# edit: change the JSON and run
# FLEETPLANE_UPDATE_CORPUS=1 pytest tests/policies/test_contracts.py -k fixture
package fleetplane.testing

# METADATA
# description: The configuration every policy test runs against.
config := {
	"namespaces": {
		"ml-research": "research",
		"ml-serving": "serving",
		"analytics": "analytics",
	},
	"teams": {
		"research": {
			"namespaces": [
				"ml-research",
			],
			"queue": "research",
			"monthly_budget_usd": 50000,
			"allowed_models": [
				"h100-80gb",
				"a100-40gb",
				"tpu-v5e",
			],
			"default_model": "a100-40gb",
			"guaranteed": {
				"nvidia.com/gpu": 16,
				"google.com/tpu": 0,
			},
			"quota": {
				"nvidia.com/gpu": 64,
				"google.com/tpu": 16,
			},
			"budget_exempt_types": [],
		},
		"serving": {
			"namespaces": [
				"ml-serving",
			],
			"queue": "serving",
			"monthly_budget_usd": 30000,
			"allowed_models": [
				"h100-80gb",
				"a100-40gb",
			],
			"default_model": "h100-80gb",
			"guaranteed": {
				"nvidia.com/gpu": 8,
				"google.com/tpu": 0,
			},
			"quota": {
				"nvidia.com/gpu": 32,
				"google.com/tpu": 0,
			},
			"budget_exempt_types": [],
		},
		"analytics": {
			"namespaces": [
				"analytics",
			],
			"queue": "analytics",
			"monthly_budget_usd": 5000,
			"allowed_models": [
				"a100-40gb",
			],
			"default_model": "a100-40gb",
			"guaranteed": {
				"nvidia.com/gpu": 2,
				"google.com/tpu": 0,
			},
			"quota": {
				"nvidia.com/gpu": 8,
				"google.com/tpu": 0,
			},
			"budget_exempt_types": [
				"notebook",
			],
		},
	},
	"models": {
		"h100-80gb": {
			"resource": "nvidia.com/gpu",
			"node_label": "nvidia.com/gpu.product",
			"label_value": "NVIDIA-H100-80GB-HBM3",
			"price_per_hour_usd": {
				"on-demand": 12.29,
				"spot": 3.93,
			},
		},
		"a100-40gb": {
			"resource": "nvidia.com/gpu",
			"node_label": "nvidia.com/gpu.product",
			"label_value": "NVIDIA-A100-SXM4-40GB",
			"price_per_hour_usd": {
				"on-demand": 3.67,
				"spot": 1.1,
			},
		},
		"tpu-v5e": {
			"resource": "google.com/tpu",
			"node_label": "cloud.google.com/gke-tpu-accelerator",
			"label_value": "tpu-v5-lite-podslice",
			"price_per_hour_usd": {
				"on-demand": 1.2,
				"spot": 0.48,
			},
		},
	},
	"workload_types": {
		"training": {
			"max_accelerators": 64,
			"capacity": "any",
			"priority_classes": [
				"fleetplane-training",
				"fleetplane-training-high",
			],
			"default_max_runtime_seconds": 86400,
			"checkpoint_required_on_spot": true,
			"budget_exempt": false,
			"preemptible": true,
			"min_runtime_seconds": 600,
			"pod_security": "baseline",
			"allow_required_pod_affinity": false,
			"max_idle_timeout_seconds": null,
			"idle": {
				"util_threshold_percent": 5,
				"window_seconds": 3600,
				"grace_seconds": 1800,
			},
		},
		"inference": {
			"max_accelerators": 16,
			"capacity": "on-demand",
			"priority_classes": [
				"fleetplane-inference",
			],
			"default_max_runtime_seconds": 2592000,
			"checkpoint_required_on_spot": false,
			"budget_exempt": true,
			"preemptible": false,
			"min_runtime_seconds": 0,
			"pod_security": "baseline",
			"allow_required_pod_affinity": true,
			"max_idle_timeout_seconds": null,
			"idle": null,
		},
		"notebook": {
			"max_accelerators": 1,
			"capacity": "any",
			"priority_classes": [
				"fleetplane-notebook",
			],
			"default_max_runtime_seconds": 28800,
			"checkpoint_required_on_spot": false,
			"budget_exempt": false,
			"preemptible": true,
			"min_runtime_seconds": 0,
			"pod_security": "baseline",
			"allow_required_pod_affinity": false,
			"max_idle_timeout_seconds": 14400,
			"idle": {
				"util_threshold_percent": 5,
				"window_seconds": 1800,
				"grace_seconds": 900,
			},
		},
		"batch": {
			"max_accelerators": 32,
			"capacity": "spot",
			"priority_classes": [
				"fleetplane-batch",
			],
			"default_max_runtime_seconds": 21600,
			"checkpoint_required_on_spot": false,
			"budget_exempt": false,
			"preemptible": true,
			"min_runtime_seconds": 300,
			"pod_security": "baseline",
			"allow_required_pod_affinity": false,
			"max_idle_timeout_seconds": null,
			"idle": {
				"util_threshold_percent": 5,
				"window_seconds": 3600,
				"grace_seconds": 1800,
			},
		},
	},
	"approval": {
		"threshold_accelerators": 32,
		"approved_ids": [
			"APR-2026-001",
		],
	},
	"registries": [
		"nvcr.io/",
		"registry.fleetplane.internal/",
	],
	"budget": {
		"warn_ratio": 0.8,
		"deny_ratio": 1.0,
	},
	"pools": {
		"h100-spot": {
			"model": "h100-80gb",
			"capacity_type": "spot",
			"max_unavailable": "10%",
			"driver_version": "570.124.06",
			"teams": [],
		},
		"a100-on-demand": {
			"model": "a100-40gb",
			"capacity_type": "on-demand",
			"max_unavailable": 2,
			"driver_version": "570.124.06",
			"teams": [],
		},
		"tpu-v5e": {
			"model": "tpu-v5e",
			"capacity_type": "on-demand",
			"max_unavailable": "25%",
			"driver_version": "",
			"teams": [],
		},
	},
	"reserved_pools": {},
	"upgrade": {
		"maintenance_windows": [
			{
				"days": [
					"sat",
					"sun",
				],
				"start": "00:00",
				"end": "23:59",
			},
			{
				"days": [
					"wed",
				],
				"start": "22:00",
				"end": "04:00",
			},
		],
	},
	"health": {
		"max_unavailable": "10%",
	},
	"lifetime": {
		"stop_grace_seconds": 1800,
		"checkpoint_window_seconds": 3600,
		"checkpoint_slack_seconds": 300,
		"orphan_grace_seconds": 300,
		"straggler_window_seconds": 1800,
		"straggler_util_percent": 5,
		"busy_util_percent": 50,
	},
	"system_namespaces": [
		"kube-system",
		"kube-public",
		"kube-node-lease",
		"fleetplane-system",
		"gpu-operator",
		"volcano-system",
		"kubeflow-system",
		"ray-system",
		"jobset-system",
		"lws-system",
	],
	"platform": {
		"controller_service_account": "system:serviceaccount:fleetplane-system:fleetplane-controller",
		"workload_controllers": [
			"system:serviceaccount:kube-system:replicaset-controller",
			"system:serviceaccount:kube-system:deployment-controller",
			"system:serviceaccount:kube-system:job-controller",
			"system:serviceaccount:kube-system:cronjob-controller",
			"system:serviceaccount:kube-system:statefulset-controller",
			"system:serviceaccount:kube-system:daemon-set-controller",
			"system:serviceaccount:kube-system:replication-controller",
			"system:kube-controller-manager",
			"system:serviceaccount:volcano-system:volcano-controllers",
			"system:serviceaccount:kubeflow-system:kubeflow-trainer-controller-manager",
			"system:serviceaccount:ray-system:kuberay-operator",
			"system:serviceaccount:jobset-system:jobset-controller-manager",
			"system:serviceaccount:lws-system:lws-controller-manager",
		],
		"admin_groups": [
			"fleetplane-admins",
		],
	},
}
