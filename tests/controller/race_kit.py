"""A race made real on the real API server: another writer changes an object between the
controller's read of it and its write, so the controller's write on the version it read meets
the server's own 409."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from controller.observe.kube import KubeClient


class WrittenAfterRead:
    """A client (every call passed to `client`) after whose first read of a path of `writes`
    that path's write runs, once, before the caller writes. `writes` empties as they run."""

    def __init__(self, client: KubeClient, writes: dict[str, Callable[[], Any]]) -> None:
        self.client, self.writes = client, writes

    def get(self, path: str) -> dict[str, Any]:
        found = self.client.get(path)
        write = self.writes.pop(path, None)
        if write is not None:
            write()
        return found

    def __getattr__(self, name: str) -> Any:
        return getattr(self.client, name)
