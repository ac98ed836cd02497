"""Read-only: the Kubernetes snapshot (`kube`, `snapshot`, `model`) and DCGM evidence
(`metrics`). Nothing here changes the cluster; writes go through `KubeClient` from `act`."""
