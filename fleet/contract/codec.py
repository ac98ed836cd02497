"""Encode the contract's dataclasses to the JSON document and decode them back, by their type
hints: one decoder for every section, which collects every problem as `path: reason` (Kueue's
way: all of them, not the first) instead of stopping.

A field is described by its type (str, int, float, bool, None, Literal, tuple[X, ...],
dict[str, X], a contract dataclass, or a union of these) and by `field(default=..., metadata=rules(...))`: its default, a
`check` of its value, whether the document must have it (`required`), its key when that is no
Python name, and whether a None is left out of the document (`omit_none`). A dataclass may add
checks across its fields with a `problems()` method yielding (relative path, reason).

Decoding is lenient where the controller always was: an absent key takes its documented
default (documents rendered before a setting existed still decode), a key the contract does not
know is ignored. A value of the wrong type is a problem, and the default stands in for it (inside an object or a
list, for the bad values alone).
"""

from __future__ import annotations

import dataclasses
import math
import re
import types
import typing
from collections.abc import Callable, Mapping
from functools import cache
from typing import Any, Literal, TypeVar, Union

T = TypeVar("T")
Check = Callable[[Any], str | None]
"""A check of a decoded value: None when it is good, else the reason it is not."""


def rules(
    *,
    check: Check | None = None,
    required: bool = False,
    key: str | None = None,
    omit_none: bool = False,
) -> dict[str, Any]:
    """The metadata of a contract field, `field(default=..., metadata=rules(...))` (see the
    module doc)."""
    return {"check": check, "required": required, "key": key, "omit_none": omit_none}


def key_of(field: dataclasses.Field[Any]) -> str:
    """The field's key in the document."""
    return field.metadata.get("key") or field.name


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


# --- encode -----------------------------------------------------------------------------------


def encode(value: Any) -> Any:
    """The JSON value of a contract value: dataclasses as objects in field order, tuples as
    lists, numbers as they are (an int stays an int)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        out: dict[str, Any] = {}
        for field in dataclasses.fields(value):
            item = getattr(value, field.name)
            if item is None and field.metadata.get("omit_none"):
                continue
            out[key_of(field)] = encode(item)
        return out
    if isinstance(value, tuple | list):
        return [encode(item) for item in value]
    if isinstance(value, Mapping):
        return {key: encode(item) for key, item in value.items()}
    return value


# --- decode -----------------------------------------------------------------------------------


class Problems:
    """Problems found while decoding, each `path: reason`."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, reason: str) -> None:
        self.items.append((path, reason))

    def lines(self) -> list[str]:
        return [f"{path}: {reason}" for path, reason in self.items]


def join(at: str, key: str) -> str:
    return f"{at}.{key}" if at else key


def decode(cls: type[T], raw: Any, at: str, problems: Problems) -> T:
    """A `cls` from a JSON object; problems are added with their path."""
    if not isinstance(raw, Mapping):
        problems.add(at or "<document>", "must be an object" if at else "must be a JSON object")
        raw = {}
    hints = _hints(typing.cast(type, cls))
    values: dict[str, Any] = {}
    found = len(problems.items)
    for field in dataclasses.fields(cls):  # type: ignore[arg-type]
        key = key_of(field)
        path = join(at, key)
        hint = hints[field.name]
        # A null section reads as an absent one, as the controller always read it.
        absent = key not in raw or (raw[key] is None and dataclasses.is_dataclass(hint))
        if absent:
            if field.metadata.get("required"):
                problems.add(path, _missing(hint))
            continue
        before = len(problems.items)
        value = _value(hint, raw[key], path, problems)
        if any(p == path for p, _ in problems.items[before:]):
            continue  # the default stands in for a bad value
        if len(problems.items) > before:
            values[field.name] = value  # keep what is good inside it
            continue
        check = field.metadata.get("check")
        reason = check(value) if check is not None else None
        if reason is not None:
            problems.add(path, reason)
            continue
        values[field.name] = value
    try:
        decoded = cls(**values)
    except TypeError:  # a field without default was absent or bad: reported above
        return typing.cast(T, None)
    if len(problems.items) == found:
        for relative, reason in getattr(decoded, "problems", lambda: ())():
            problems.add(join(at, relative), reason)
    return decoded


def _missing(hint: Any) -> str:
    shape = _origin(hint)
    if shape is dict or (isinstance(hint, type) and dataclasses.is_dataclass(hint)):
        return "must be an object"
    return "required"


def _origin(hint: Any) -> Any:
    return typing.get_origin(hint) or hint


def _value(hint: Any, raw: Any, path: str, problems: Problems) -> Any:
    origin = typing.get_origin(hint)
    if hint is Any:
        return raw
    if origin in (Union, types.UnionType):
        options = typing.get_args(hint)
        if raw is None and type(None) in options:
            return None
        for option in options:
            if option is not type(None) and _fits(option, raw):
                return _value(option, raw, path, problems)
        problems.add(path, "must be " + " or ".join(_describe(o) for o in options))
        return None
    if origin is Literal:
        if raw not in typing.get_args(hint):
            problems.add(path, _describe(hint))
        return raw
    if origin is tuple:
        if not isinstance(raw, list | tuple):
            problems.add(path, "must be a list")
            return ()
        item = typing.get_args(hint)[0]
        return tuple(_value(item, v, f"{path}[{i}]", problems) for i, v in enumerate(raw))
    if origin is dict:
        if not isinstance(raw, Mapping):
            problems.add(path, "must be an object")
            return {}
        item = typing.get_args(hint)[1]
        return {str(k): _value(item, v, join(path, str(k)), problems) for k, v in raw.items()}
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        return decode(hint, raw, path, problems)
    if not _fits(hint, raw):
        problems.add(path, "must be " + _describe(hint))
    return raw


def _fits(hint: Any, raw: Any) -> bool:
    """Whether a JSON value has the shape of a type (its contents aside)."""
    origin = typing.get_origin(hint)
    if hint is Any:
        return True
    if hint is bool:
        return isinstance(raw, bool)
    if hint is int:
        return isinstance(raw, int) and not isinstance(raw, bool)
    if hint is float:
        return isinstance(raw, int | float) and not isinstance(raw, bool) and math.isfinite(raw)
    if hint is str:
        return isinstance(raw, str)
    if hint is type(None):
        return raw is None
    if origin is Literal:
        return raw in typing.get_args(hint)
    if origin is tuple:
        return isinstance(raw, list | tuple)
    if origin is dict or (isinstance(hint, type) and dataclasses.is_dataclass(hint)):
        return isinstance(raw, Mapping)
    if origin in (Union, types.UnionType):
        return any(_fits(option, raw) for option in typing.get_args(hint))
    return False


def _describe(hint: Any) -> str:
    origin = typing.get_origin(hint)
    if origin is Literal:
        return "one of " + ", ".join(str(v) for v in typing.get_args(hint))
    if origin is tuple:
        return "a list"
    if origin is dict or (isinstance(hint, type) and dataclasses.is_dataclass(hint)):
        return "an object"
    names = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}
    return names.get(hint, "null")


# --- checks -----------------------------------------------------------------------------------


def at_least(minimum: float) -> Check:
    def check(value: Any) -> str | None:
        return None if value is None or value >= minimum else f"must be at least {minimum:g}"

    return check


def non_negative(value: Any) -> str | None:
    return None if value is None or value >= 0 else "must not be negative"


def positive(value: Any) -> str | None:
    return None if value is None or value > 0 else "must be positive"


def between(low: float, high: float) -> Check:
    def check(value: Any) -> str | None:
        if value is None or low <= value <= high:
            return None
        return f"must be from {low:g} to {high:g}"

    return check


_PERCENT = re.compile(r"^(0|[1-9][0-9]*)%$")


def nodes_or_percent(value: Any) -> str | None:
    """`max_unavailable`: a whole number of nodes, a digit string, or "N%" (Kubernetes'
    IntOrString, as controller/upgrade/limits.py resolves it)."""
    if isinstance(value, int) and value >= 0:
        return None
    if isinstance(value, str) and (value.isdigit() or _PERCENT.match(value)):
        return None
    return f'must be a non-negative integer or a percentage like "10%", not {value!r}'
