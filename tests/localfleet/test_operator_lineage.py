"""A TrainJob's pods are the TrainJob's in the controller's records, with the real operators
running (issue 30): the pass's snapshot lists the JobSet the Trainer made (with its owner
reference), so the chain Pod -> Job -> JobSet -> TrainJob reaches the TrainJob the user wrote,
each link confirmed by uid (decide.lineage), not the JobSet where it used to stop."""

from __future__ import annotations

import pytest

from controller.decide.lineage import by_uid, lineage
from controller.observe.kube import KubeClient
from controller.observe.snapshot import take_snapshot
from localfleet.operators import LocalOperators
from tests.localfleet.operator_kit import NS, delete, placed, trainjob
from tests.localfleet.test_volcano import name

pytestmark = pytest.mark.integration


def test_a_trainjobs_pods_are_kept_under_the_trainjob(
    operators: LocalOperators,
) -> None:
    cluster = operators.cluster
    app = name("tj")
    cluster.apply([trainjob(app)])
    try:
        pods = placed(cluster, f"jobset.sigs.k8s.io/jobset-name={app}", 2)
        uid = cluster.get_json("trainjob", app, "-n", NS)["metadata"]["uid"]
        jobset_uid = cluster.get_json("jobset", app, "-n", NS)["metadata"]["uid"]
        kube = KubeClient.from_kubeconfig(str(cluster.kubeconfig))
        try:
            snapshot = take_snapshot(kube)
        finally:
            kube.close()
        objects = by_uid(snapshot.workload_objects)
        assert objects[jobset_uid].kind == "JobSet"
        names = {p["metadata"]["name"] for p in pods}
        seen = [p for p in snapshot.pods if p.namespace == NS and p.name in names]
        assert len(seen) == 2
        for pod in seen:
            chain = lineage(pod.uid, "Pod", pod.name, pod.created, pod.owner, objects)
            assert (chain.top_uid, chain.kind, chain.name) == (uid, "TrainJob", app)
            assert chain.between[-1] == jobset_uid
    finally:
        delete(cluster, "trainjob", app)
