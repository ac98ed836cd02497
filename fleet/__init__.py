"""The fleet model, without Pulumi: the configuration schema and its checks, the catalog of accelerators, the label keys, node labels and taints, and the document OPA and the controller read."""
