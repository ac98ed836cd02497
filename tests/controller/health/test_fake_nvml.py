"""The fake NVML against the installed pynvml: same constants, error classes and codes, same
function names and parameters, and every NVML name the health check uses exists in both."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pynvml
import pytest

from tests.controller.health import fake_nvml
from tests.controller.health.fake_nvml import EXPORTED, FakeNode, FakeNvml

HEALTH_SOURCES = sorted(
    (Path(__file__).resolve().parents[3] / "controller" / "health").glob("*.py")
)


def test_every_constant_has_pynvml_value() -> None:
    constants = {n: v for n, v in EXPORTED.items() if not n.startswith("NVMLError")}
    want = {name: getattr(pynvml, name, "<missing>") for name in constants}
    assert constants == want


def test_error_classes_match_pynvml_by_name_and_code() -> None:
    def by_code(module: object) -> dict[int, str]:
        mapping = module.NVMLError._valClassMapping  # type: ignore[attr-defined]
        return {code: cls.__name__ for code, cls in mapping.items()}

    assert by_code(fake_nvml) == by_code(pynvml)
    real_names = {n for n in dir(pynvml) if n.startswith("NVMLError_")}
    fake_names = {n for n in EXPORTED if n.startswith("NVMLError_")}
    assert fake_names == real_names


@pytest.mark.parametrize("code", sorted(pynvml.NVMLError._valClassMapping))
def test_nvmlerror_of_a_code_is_its_subclass_with_the_same_text(code: int) -> None:
    real, fake = pynvml.NVMLError(code), fake_nvml.NVMLError(code)
    assert type(fake).__name__ == type(real).__name__
    assert isinstance(fake, fake_nvml.NVMLError)
    assert fake.value == real.value == code
    # Without a loaded library pynvml words unknown codes as the fake does.
    assert str(fake) == str(real)


def test_subclass_constructed_directly_carries_its_code() -> None:
    assert EXPORTED["NVMLError_NotSupported"]().value == pynvml.NVMLError_NotSupported().value == 3


def test_fake_functions_have_pynvml_names_and_parameters() -> None:
    functions = [n for n in dir(FakeNvml) if n.startswith("nvml")]
    assert functions
    got = {
        n: list(inspect.signature(getattr(FakeNvml(FakeNode()), n)).parameters) for n in functions
    }
    want = {n: list(inspect.signature(getattr(pynvml, n)).parameters) for n in functions}
    assert got == want


def test_every_nvml_name_the_check_uses_is_in_pynvml_and_in_the_fake() -> None:
    used: set[str] = set()
    for path in HEALTH_SOURCES:
        text = path.read_text()
        used |= set(re.findall(r"\"(nvml[A-Z]\w+)\"", text))
        used |= set(re.findall(r"\bnvml\.(\w+)", text))
    assert "nvmlDeviceGetRemappedRows" in used and "NVMLError_NotSupported" in used
    fake = FakeNvml(FakeNode())
    assert sorted(n for n in used if not hasattr(pynvml, n)) == []
    assert sorted(n for n in used if not hasattr(fake, n)) == []


def test_calls_before_init_fail_as_in_nvml() -> None:
    nvml = FakeNvml(FakeNode.hgx(1))
    with pytest.raises(nvml.NVMLError_Uninitialized):
        nvml.nvmlDeviceGetCount()
    nvml.nvmlInit()
    assert nvml.nvmlDeviceGetCount() == 1


def test_scenario_round_trips_through_json() -> None:
    node = FakeNode.hgx(2).gpu(1, lambda g: g.with_volatile_dbe(1).with_xids(79))
    assert FakeNode.from_json(node.to_json()) == node
