"""A fleet on this machine: the local control plane and its PKI, KWOK fake GPU/TPU nodes, OPA and Prometheus as processes, and the `local` Pulumi stack. Runs from a checkout."""
