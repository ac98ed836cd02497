"""Decoding a few thousand listed pods through the official client's models against raw JSON
(`bench/controller_pass.py --decode-only`; the first table in controller/observe/kube.py)."""

from __future__ import annotations

import time
from pathlib import Path

from controller.observe.kube import KubeClient


def log(message: str) -> None:
    print(f"[bench] {message}", flush=True)


def measure_decoding(client: KubeClient, kubeconfig: Path, count: int = 5000) -> None:
    import kubernetes
    import orjson

    api_client = kubernetes.config.new_client_from_config(str(kubeconfig))
    core = kubernetes.client.CoreV1Api(api_client)

    def typed() -> int:
        n, token = 0, None
        while n < count:
            page = core.list_pod_for_all_namespaces(limit=500, _continue=token)
            n += len(page.items)
            token = page.metadata._continue if page.metadata else None
            if not token:
                break
        return n

    def raw_client() -> int:
        n, token = 0, None
        while n < count:
            response = core.list_pod_for_all_namespaces(
                limit=500, _continue=token, _preload_content=False
            )
            body = orjson.loads(response.data)  # type: ignore[attr-defined]
            n += len(body["items"])
            token = body["metadata"].get("continue")
            if not token:
                break
        return n

    def raw_requests() -> int:
        n = 0
        for page in client.list_pages("/api/v1/pods", limit=500):
            n += len(page)
            if n >= count:
                break
        return n

    for name, fn in (
        ("kubernetes client, typed models", typed),
        ("kubernetes client, _preload_content=False + orjson", raw_client),
        ("requests + orjson (list_pages)", raw_requests),
    ):
        started = time.perf_counter()
        n = fn()
        seconds = time.perf_counter() - started
        log(f"decode: {name:55s} {n} pods in {seconds:6.2f} s ({n / seconds:7.0f} pods/s)")
