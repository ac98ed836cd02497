"""The pinned tools: every tool the project runs against, with its version and recipe."""

from __future__ import annotations

from tools.bootstrap.debian import debian_tool, iptables_tool
from tools.bootstrap.go import (
    build_kube,
    build_kwok,
    go_recipe,
    go_tool_builder,
    go_version,
    required_version,
)
from tools.bootstrap.karpenter import karpenter_tool
from tools.bootstrap.operators import operator_tools
from tools.bootstrap.pulumi import (
    PULUMI_DIR,
    PULUMI_KUBERNETES_DIR,
    PULUMI_KUBERNETES_SDK,
    PULUMI_LANGUAGE_PYTHON_DIR,
    PULUMI_PYTHON_SHIMS,
    build_pulumi,
    build_pulumi_kubernetes,
)
from tools.bootstrap.tool import GO_DIR, Tool
from tools.bootstrap.volcano import (
    VOLCANO_APIS,
    VOLCANO_COMMANDS,
    VOLCANO_DIR,
    VOLCANO_FILES,
    VOLCANO_MODULE,
    build_volcano,
    volcano_overlay,
)


def pinned_tools() -> list[Tool]:
    go_key = go_version()
    kube_dir = GO_DIR / "kube"
    return [
        Tool(
            name="opa",
            version=required_version(GO_DIR / "opa", "github.com/open-policy-agent/opa"),
            binaries=("opa",),
            obtain=go_tool_builder(
                "github.com/open-policy-agent/opa", "github.com/open-policy-agent/opa", "opa"
            ),
            recipe=go_recipe(GO_DIR / "opa"),
            extra_key=go_key,
        ),
        Tool(
            name="etcd",
            version=required_version(GO_DIR / "etcd", "go.etcd.io/etcd/server/v3"),
            binaries=("etcd",),
            obtain=go_tool_builder(
                "go.etcd.io/etcd/server/v3", "go.etcd.io/etcd/server/v3", "etcd"
            ),
            recipe=go_recipe(GO_DIR / "etcd"),
            extra_key=go_key,
        ),
        Tool(
            name="kwok",
            version=required_version(GO_DIR / "kwok", "sigs.k8s.io/kwok"),
            binaries=("kwok", "kwok-stages.yaml"),
            obtain=build_kwok,
            recipe=go_recipe(GO_DIR / "kwok"),
            extra_key=go_key,
        ),
        Tool(
            name="kube",
            version=required_version(kube_dir, "k8s.io/kubernetes"),
            binaries=(
                "kube",
                "kube-apiserver",
                "kube-controller-manager",
                "kube-scheduler",
                "kubelet",
                "kube-proxy",
                "kubectl",
            ),
            obtain=build_kube,
            recipe=go_recipe(kube_dir),
            extra_key=go_key,
        ),
        Tool(
            name="pulumi",
            version=required_version(PULUMI_DIR, "github.com/pulumi/pulumi/pkg/v3"),
            binaries=(
                "pulumi",
                "pulumi-language-python",
                *PULUMI_PYTHON_SHIMS,
            ),
            obtain=build_pulumi,
            recipe=go_recipe(PULUMI_DIR) + go_recipe(PULUMI_LANGUAGE_PYTHON_DIR),
            extra_key=go_key,
        ),
        Tool(
            # The provider is built from a commit of the pulumi-kubernetes repository and stamped
            # with the release of the Python SDK it matches (the Go SDK the wrapper requires).
            name="pulumi-resource-kubernetes",
            version=required_version(PULUMI_KUBERNETES_DIR, PULUMI_KUBERNETES_SDK),
            binaries=("pulumi-resource-kubernetes",),
            obtain=build_pulumi_kubernetes,
            recipe=go_recipe(PULUMI_KUBERNETES_DIR),
            extra_key=go_key,
        ),
        Tool(
            name="volcano",
            version=required_version(VOLCANO_DIR, VOLCANO_MODULE),
            binaries=("volcano", *VOLCANO_COMMANDS, *VOLCANO_FILES),
            obtain=build_volcano,
            recipe=go_recipe(VOLCANO_DIR) + volcano_overlay(),
            extra_key=go_key + repr(VOLCANO_APIS),
        ),
        # JobSet, LeaderWorkerSet, KubeRay and Kubeflow Trainer (tools/bootstrap/operators.py)
        *operator_tools(),
        # Karpenter's core with its KWOK cloud provider (tools/bootstrap/karpenter.py)
        karpenter_tool(),
        # Debian bookworm's versions as `apt-cache policy` offered them when pinned.
        debian_tool(
            name="prometheus",
            package="prometheus",
            version="2.42.0",
            files={"prometheus": "usr/bin/prometheus", "promtool": "usr/bin/promtool"},
        ),
        debian_tool(
            name="pushgateway",
            package="prometheus-pushgateway",
            version="1.5.1",
            files={"pushgateway": "usr/bin/prometheus-pushgateway"},
        ),
        debian_tool(
            name="alertmanager",
            package="prometheus-alertmanager",
            version="0.25.0",
            # Debian's build reads its notification templates from /usr/share instead of
            # embedding them; the local fleet lays these copies over /usr/share for its process.
            files={
                "alertmanager": "usr/bin/prometheus-alertmanager",
                "amtool": "usr/bin/amtool",
                **{
                    f"share/prometheus/alertmanager/{name}": (
                        f"usr/share/prometheus/alertmanager/{name}"
                    )
                    for name in ("default.tmpl", "email.tmpl")
                },
            },
        ),
        # What a real container node needs: containerd (its CRI plugin is built in) with runc,
        # the CNI plugins a bridge network takes, a registry for pulls by digest, and catatonit
        # as the pause process. containerd finds its shim beside itself or on PATH, the shim
        # finds runc on PATH; point containerd's CNI bin_dir at tools/bin/cni.
        debian_tool(
            name="containerd",
            package="containerd",
            version="1.6.20",
            files={
                "containerd": "usr/bin/containerd",
                "containerd-shim-runc-v2": "usr/bin/containerd-shim-runc-v2",
                "ctr": "usr/bin/ctr",
            },
        ),
        debian_tool(
            name="runc",
            package="runc",
            version="1.1.5",
            files={"runc": "usr/sbin/runc"},
        ),
        debian_tool(
            name="cni-plugins",
            package="containernetworking-plugins",
            version="1.1.1",
            files={
                f"cni/{plugin}": f"usr/lib/cni/{plugin}"
                for plugin in ("bridge", "host-local", "loopback", "portmap")
            },
        ),
        debian_tool(
            name="registry",
            package="docker-registry",
            version="2.8.2",
            files={"registry": "usr/bin/docker-registry"},
        ),
        # kube-proxy's iptables mode (Debian's, the nf_tables backend; see iptables_tool)
        iptables_tool("1.8.9"),
        debian_tool(
            name="catatonit",
            package="catatonit",
            version="0.1.7",
            files={"catatonit": "usr/bin/catatonit"},
        ),
    ]
