"""A server that answers 200 with garbage (not JSON, JSON of the wrong shape, a series without
a number) gets a PermanentError naming the server and what is wrong, never a traceback out of
the pass; for Prometheus that means no evidence, so no pod is idle on it."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import SimpleNamespace
from typing import Any

import pytest

from controller.act.opa import Opa
from controller.errors import ControllerError, NotFoundError, PermanentError
from controller.observe.kube import Credentials, KubeClient
from controller.observe.metrics import Prometheus


@contextlib.contextmanager
def answering(
    body: bytes, content_type: str = "application/json", status: int = 200
) -> Iterator[str]:
    """A loopback server answering every request `status` with `body`; its URL."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(length)
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = do_PATCH = do_DELETE = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


# --- OPA ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (b"{not json", "answer is not JSON"),
        (b"", "answer is not JSON"),
        (b"[1, 2]", "answer is not a JSON object but list"),
        (b'"allow"', "answer is not a JSON object but str"),
        (b'{"result": []}', "no boolean `allow`"),
        (b'{"result": {"allow": "yes"}}', "no boolean `allow`"),
    ],
)
def test_a_malformed_opa_answer_is_a_permanent_error(body: bytes, want: str) -> None:
    with answering(body) as url:
        opa = Opa(url, timeout=5)
        try:
            with pytest.raises(PermanentError) as caught:
                opa.decide("idle", {"pod": {}})
        finally:
            opa.close()
    assert f"opa {url}/v1/data/fleetplane/decisions/idle" in str(caught.value)
    assert want in str(caught.value)


# --- Prometheus ---------------------------------------------------------------------------------


def series(value: Any, metric: Any = None) -> bytes:
    import orjson

    one: dict[str, Any] = {
        "metric": metric if metric is not None else {"namespace": "ml", "pod": "nb", "gpu": "0"}
    }
    if value is not None:
        one["value"] = value
    return orjson.dumps({"status": "success", "data": {"resultType": "vector", "result": [one]}})


@pytest.mark.parametrize(
    ("body", "want"),
    [
        (b"<html>proxy error</html>", "answer is not JSON"),
        (b"[]", "answer is not a JSON object"),
        (b'{"status": "success"}', "no data.result list"),
        (b'{"status": "success", "data": []}', "no data.result list"),
        (b'{"status": "success", "data": {"result": {}}}', "no data.result list"),
        (b'{"status": "error", "error": "bad"}', "failed: bad"),
        (b'{"status": "success", "data": {"result": [1]}}', "malformed series"),
        (series(None), "malformed series"),
        (series([1.0]), "malformed series"),
        (series([1.0, "busy"]), "malformed series"),
        (series([1.0, 3]), "malformed series"),
        (series([1.0, "3"], metric=["ml", "nb"]), "malformed series"),
    ],
)
def test_a_malformed_prometheus_answer_is_a_permanent_error(body: bytes, want: str) -> None:
    with answering(body) as url:
        prometheus = Prometheus(url, timeout=5)
        try:
            with pytest.raises(PermanentError) as caught:
                prometheus.evidence(600, 1_800_000_000.0, 5.0)
        finally:
            prometheus.close()
    assert f"prometheus {url}" in str(caught.value)
    assert want in str(caught.value)


def test_a_well_formed_answer_still_reads() -> None:
    with answering(series([1.0, "80"])) as url:
        prometheus = Prometheus(url, timeout=5)
        try:
            found = prometheus.evidence(600, 1_800_000_000.0, 5.0)
        finally:
            prometheus.close()
    assert found[("ml", "nb")].gpus[("", "0")].max_util_percent == 80.0


def test_a_malformed_prometheus_answer_is_no_evidence_for_the_pass() -> None:
    """The pass's evidence step hands the error on (it becomes idle.metrics-unavailable and
    nothing is warned or reclaimed) instead of raising out of the pass."""
    from controller.concerns.idle import evidence

    idle = SimpleNamespace(window_seconds=600, util_threshold_percent=5.0)
    fleet = SimpleNamespace(workload_types={"notebook": SimpleNamespace(idle=idle)})
    with answering(series([1.0, "busy"])) as url:
        prometheus = Prometheus(url, timeout=5)
        try:
            found = evidence(fleet, prometheus, 1_800_000_000.0)  # type: ignore[arg-type]
        finally:
            prometheus.close()
    assert isinstance(found, ControllerError)
    assert f"prometheus {url}" in str(found)


# --- Kubernetes ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "call", "want"),
    [
        (b"{not json", "get", "answer is not JSON"),
        (b"[]", "get", "answer is not a JSON object but list"),
        (b"null", "get", "answer is not a JSON object but NoneType"),
        (b"[1]", "merge_patch", "answer is not a JSON object but list"),
        (b'"x"', "create", "answer is not a JSON object but str"),
        (b"[1]", "list", "answer is not a JSON object but list"),
        (b'{"items": {"a": 1}}', "list", "not a list object"),
        (b'{"items": [], "metadata": [1]}', "list", "not a list object"),
    ],
)
def test_a_malformed_kubernetes_answer_is_a_permanent_error(
    body: bytes, call: str, want: str
) -> None:
    with answering(body) as url:
        kube = KubeClient(Credentials(server=url), timeout=5)
        try:
            with pytest.raises(PermanentError) as caught:
                if call == "get":
                    kube.get("/api/v1/namespaces/ml/pods/nb")
                elif call == "merge_patch":
                    kube.merge_patch("/api/v1/namespaces/ml/pods/nb", {"metadata": {}})
                elif call == "create":
                    kube.create("/api/v1/namespaces/ml/pods", {"metadata": {}})
                else:
                    kube.list("/apis/policy/v1/poddisruptionbudgets")
        finally:
            kube.close()
    assert url in str(caught.value)
    assert want in str(caught.value)


def test_creating_in_a_namespace_being_deleted_is_gone_not_refused() -> None:
    """The API server's NamespaceLifecycle answer (403, cause NamespaceTerminating): what the
    controller meant to create goes away with the namespace, so acts treat it as gone; any
    other 403 stays a permanent refusal."""
    terminating = (
        b'{"kind":"Status","status":"Failure","reason":"Forbidden","code":403,'
        b'"message":"unable to create new content in namespace t because it is being terminated",'
        b'"details":{"causes":[{"type":"NamespaceTerminating","field":"metadata.namespace"}]}}'
    )
    forbidden = b'{"kind":"Status","status":"Failure","reason":"Forbidden","code":403}'
    for body, error in ((terminating, NotFoundError), (forbidden, PermanentError)):
        with answering(body, status=403) as url:
            kube = KubeClient(Credentials(server=url), timeout=5)
            try:
                with pytest.raises(error) as caught:
                    kube.create("/api/v1/namespaces/t/configmaps", {"metadata": {"name": "x"}})
            finally:
                kube.close()
        assert "HTTP 403" in str(caught.value)
        if error is PermanentError:
            assert not isinstance(caught.value, NotFoundError)
