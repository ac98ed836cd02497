"""Readers of a decoded JSON object's fields that check each field's JSON type.

They take plain dicts (orjson, the tests) or the lazy objects of `simdjson`, read through `.get`,
`[]` and iteration, and raise `DecodeError` naming the field (`path.key`) when it has the wrong
type; `decoding` runs a whole conversion and prefixes the error with the object's identity. The
slim views of `model` and `workload_objects` are built with them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import simdjson

from controller.errors import PermanentError

T = TypeVar("T")


class DecodeError(PermanentError):
    """A listed object has a field of the wrong type (or is no object at all)."""


JSON_OBJECTS = (dict, simdjson.Object)
"""What a JSON object decodes to (plain or lazy)."""
JSON_ARRAYS = (list, tuple, simdjson.Array)
"""What a JSON array decodes to (plain or lazy)."""


def plain(value: Any) -> Any:
    """A decoded JSON value as plain Python: a lazy (simdjson) object or array is copied out,
    anything else is returned as it is."""
    if isinstance(value, simdjson.Object):
        return value.as_dict()
    if isinstance(value, simdjson.Array):
        return value.as_list()
    return value


def json_type(value: Any) -> str:
    """The JSON type of a value, as an error message names it."""
    if isinstance(value, JSON_OBJECTS):
        return "object"
    if isinstance(value, JSON_ARRAYS):
        return "array"
    return type(value).__name__


def object_field(parent: Any, key: str, path: str) -> Any:
    """parent[key] when it is a JSON object; {} when missing or null; DecodeError otherwise.
    `path` (where parent is, a literal) only goes into the error."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, JSON_OBJECTS):
        raise DecodeError(f"{path}.{key}: expected an object, got {json_type(value)}")
    return value


def array_field(parent: Any, key: str, path: str) -> Any:
    """parent[key] when it is a JSON array of objects; () when missing or null."""
    value = parent.get(key)
    if value is None:
        return ()
    if not isinstance(value, JSON_ARRAYS):
        raise DecodeError(f"{path}.{key}: expected an array, got {json_type(value)}")
    for index, element in enumerate(value):
        if not isinstance(element, JSON_OBJECTS):
            raise DecodeError(
                f"{path}.{key}[{index}]: expected an object, got {json_type(element)}"
            )
    return value


def string_field(parent: Any, key: str, path: str, default: str | None = "") -> Any:
    """parent[key] when it is a string; `default` when missing or null."""
    value = parent.get(key)
    if value is None:
        return default
    if not isinstance(value, str):
        raise DecodeError(f"{path}.{key}: expected a string, got {json_type(value)}")
    return value


def string_map_field(parent: Any, key: str, path: str) -> dict[str, str]:
    """parent[key] copied out as a dict of strings (labels, annotations, node selectors)."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, JSON_OBJECTS):
        raise DecodeError(f"{path}.{key}: expected an object, got {json_type(value)}")
    copied = plain(value)
    if not all(type(v) is str for v in copied.values()):
        k, v = next((k, v) for k, v in copied.items() if type(v) is not str)
        raise DecodeError(f"{path}.{key}[{k!r}]: expected a string, got {json_type(v)}")
    return copied if isinstance(value, simdjson.Object) else dict(copied)


def root_sections(raw: Any) -> tuple[Any, Any, Any]:
    """metadata, spec and status of an object ({} for each one missing)."""
    if not isinstance(raw, JSON_OBJECTS):
        raise DecodeError(f"expected an object, got {json_type(raw)}")
    return (
        object_field(raw, "metadata", ""),
        object_field(raw, "spec", ""),
        object_field(raw, "status", ""),
    )


def _identity(kind: str, raw: Any) -> str:
    """`pod ns/name` for an error message, as far as the object allows."""
    try:
        metadata = raw.get("metadata") or {}
        name, namespace = metadata.get("name"), metadata.get("namespace")
    except (AttributeError, TypeError, ValueError):
        return kind
    return f"{kind} {namespace}/{name}" if namespace else f"{kind} {name}"


def decoding(kind: str, raw: Any, convert: Callable[[], T]) -> T:
    """Run a conversion; any malformed field becomes a DecodeError naming the object."""
    try:
        return convert()
    except DecodeError as error:
        raise DecodeError(f"{_identity(kind, raw)}: {error}") from None
    except (AttributeError, TypeError, ValueError, KeyError) as error:
        raise DecodeError(f"{_identity(kind, raw)}: malformed: {error}") from None


def integer_field(parent: Any, key: str, path: str) -> int | None:
    """parent[key] when it is an integer (not a boolean); None when missing or null."""
    value = parent.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise DecodeError(f"{path}.{key}: expected an integer, got {json_type(value)}")
    return value


def object_list(parent: Any, key: str, path: str) -> list[Any]:
    """parent[key] as a list of JSON objects ([] when missing or null), checked in one pass."""
    value = parent.get(key)
    if value is None:
        return []
    if not isinstance(value, JSON_ARRAYS):
        raise DecodeError(f"{path}.{key}: expected an array, got {json_type(value)}")
    elements = list(value)
    for index, element in enumerate(elements):
        if not isinstance(element, JSON_OBJECTS):
            raise DecodeError(
                f"{path}.{key}[{index}]: expected an object, got {json_type(element)}"
            )
    return elements
