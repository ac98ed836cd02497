"""The steps every node workflow shares: idempotent side effects a handler asks for. A mode
adds its own (restarting the driver, a node condition, an eviction with what it costs) and
carries them out with `act`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from controller.nodeflow.pods import PodView


@dataclass(frozen=True, kw_only=True)
class Cordon:
    name: ClassVar[str] = "cordon"

    def describe(self, node: str) -> str:
        return f"cordon node {node}"


@dataclass(frozen=True, kw_only=True)
class Uncordon:
    name: ClassVar[str] = "uncordon"

    def describe(self, node: str) -> str:
        return f"uncordon node {node}"


@dataclass(frozen=True, kw_only=True)
class Taint:
    """A NoSchedule taint `key=value` (replacing any taint with that key)."""

    name: ClassVar[str] = "taint"
    key: str
    value: str

    def describe(self, node: str) -> str:
        return f"taint node {node} {self.key}={self.value}:NoSchedule"


@dataclass(frozen=True, kw_only=True)
class Untaint:
    name: ClassVar[str] = "untaint"
    key: str

    def describe(self, node: str) -> str:
        return f"remove taint {self.key} from node {node}"


@dataclass(frozen=True, kw_only=True)
class CreateValidator:
    name: ClassVar[str] = "create-validator"
    manifest: dict[str, Any]

    @property
    def key(self) -> str:
        meta = self.manifest["metadata"]
        return f"{meta['namespace']}/{meta['name']}"

    def describe(self, node: str) -> str:
        return f"create validator pod {self.key} on {node}"


@dataclass(frozen=True, kw_only=True)
class DeleteValidator:
    name: ClassVar[str] = "delete-validator"
    pod: PodView

    def describe(self, node: str) -> str:
        return f"delete validator pod {self.pod.key}"
