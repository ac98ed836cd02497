from __future__ import annotations

from pathlib import Path

import pytest

from tools import bootstrap
from tools.bootstrap.debian import is_upstream_version
from tools.bootstrap.go import required_version
from tools.bootstrap.tool import run


def test_every_pinned_tool_has_a_version_read_from_its_recipe() -> None:
    tools = {tool.name: tool for tool in bootstrap.pinned_tools()}
    assert set(tools) == {
        "opa",
        "etcd",
        "kwok",
        "kube",
        "pulumi",
        "pulumi-resource-kubernetes",
        "volcano",
        "jobset",
        "lws",
        "kuberay",
        "trainer",
        "karpenter",
        "prometheus",
        "pushgateway",
        "alertmanager",
        "containerd",
        "runc",
        "cni-plugins",
        "iptables",
        "registry",
        "catatonit",
    }
    assert tools["pulumi"].version.startswith("v3.")
    assert tools["pulumi-resource-kubernetes"].version.startswith("v4.")
    assert tools["kube"].version.startswith("v1.")
    assert tools["karpenter"].version.startswith("v1.")
    assert set(tools["karpenter"].binaries) == {"karpenter-kwok", "karpenter-crds.yaml"}
    assert {"kube-apiserver", "kubelet", "kube-proxy", "kubectl"} <= set(tools["kube"].binaries)
    assert tools["volcano"].version == "v1.15.1"
    # the operators' releases, from one wrapper module (Trainer v2.1.0 requires JobSet v0.10.1)
    assert {name: tools[name].version for name in ("jobset", "lws", "kuberay", "trainer")} == {
        "jobset": "v0.10.1",
        "lws": "v0.7.0",
        "kuberay": "v1.5.0",
        "trainer": "v2.1.0",
    }
    assert {"trainer-crds.yaml", "trainer-torch-runtime.yaml"} <= set(tools["trainer"].binaries)
    assert {"vc-scheduler", "vc-controller-manager", "vc-webhook-manager", "volcano-crds.yaml"} <= (
        set(tools["volcano"].binaries)
    )
    assert tools["cni-plugins"].binaries == (
        "cni/bridge",
        "cni/host-local",
        "cni/loopback",
        "cni/portmap",
    )
    # kube-proxy runs these from PATH: tools/bin/iptables is the folder to put on it
    assert {"iptables/iptables", "iptables/iptables-restore", "iptables/ip6tables-save"} <= set(
        tools["iptables"].binaries
    )


def test_the_volcano_recipe_covers_the_apis_overlay() -> None:
    (volcano,) = [tool for tool in bootstrap.pinned_tools() if tool.name == "volcano"]
    names = {path.name for path in volcano.recipe}
    assert {"go.mod", "go.sum", "main.go", "queue_allocation_gate.go"} <= names


def test_debian_versions_match_on_the_upstream_version_only() -> None:
    assert is_upstream_version("1.6.20~ds1-1+deb12u3", "1.6.20")
    assert is_upstream_version("2.42.0+ds-5+deb12u1", "2.42.0")
    assert is_upstream_version("1:0.25.0-1+b4", "0.25.0")
    assert not is_upstream_version("1.6.200-1", "1.6.20")
    assert not is_upstream_version("1.7.0-1", "1.6.20")
    assert not is_upstream_version("", "1.6.20")


def test_cache_key_changes_with_the_recipe(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETPLANE_TOOLS_CACHE", str(tmp_path / "cache"))
    recipe = tmp_path / "go.mod"
    recipe.write_text("module x\n")
    tool = bootstrap.Tool(
        name="x", version="v1", binaries=("x",), obtain=lambda t, p: None, recipe=(recipe,)
    )
    before = tool.cache_dir()
    recipe.write_text("module x\nrequire y v2\n")
    assert tool.cache_dir() != before
    assert before.parent == tmp_path / "cache"


def test_the_cache_key_is_the_one_of_caches_already_built(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The folder name hashes the extra key, then each recipe file's name and bytes: a change of
    that computation would miss every cache built before it (and rebuild for half an hour)."""
    monkeypatch.setenv("FLEETPLANE_TOOLS_CACHE", str(tmp_path))
    (tmp_path / "go.mod").write_text("module x\n")
    (tmp_path / "go.sum").write_text("h1:abc\n")
    tool = bootstrap.Tool(
        name="x",
        version="v1",
        binaries=("x",),
        obtain=lambda t, p: None,
        recipe=(tmp_path / "go.mod", tmp_path / "go.sum"),
        extra_key="go1.24.0",
    )
    assert tool.cache_dir() == tmp_path / "x-v1-b86321089d51"


def test_a_failing_obtain_names_the_tool(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FLEETPLANE_TOOLS_CACHE", str(tmp_path))

    def fail(tool: bootstrap.Tool, out: Path) -> None:
        run(tool, ["false"], cwd=tmp_path)

    tool = bootstrap.Tool(name="broken", version="v9", binaries=("broken",), obtain=fail)
    with pytest.raises(bootstrap.BootstrapError, match="could not obtain broken v9"):
        bootstrap.obtain(tool, log=lambda message: None)
    assert not tool.cache_dir().exists()


def test_required_version_reads_go_mod(tmp_path: Path) -> None:
    (tmp_path / "go.mod").write_text("module m\n\nrequire k8s.io/kubernetes v1.36.3\n")
    assert required_version(tmp_path, "k8s.io/kubernetes") == "v1.36.3"
    with pytest.raises(bootstrap.BootstrapError, match="does not require"):
        required_version(tmp_path, "sigs.k8s.io/kwok")
