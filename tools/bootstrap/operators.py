"""The workload operators teams use (JobSet, LeaderWorkerSet, KubeRay, Kubeflow Trainer): each
release's controller manager, with the CRDs (and, for the Trainer, the training runtimes) of the
same release, from its module in the module cache.

The four are built from one wrapper module, tools/go/operators: none of their go.mod files has a
`replace` line, so the wrapper only requires them (its `tool` lines name the main packages) and
Go's version selection gives them one set of shared dependencies (Kubernetes client libraries
v0.34, controller-runtime v0.22). Each is its own tool with its own binary, since their mains
are package main and cannot be imported into one multi-call binary without copying them; the
shared dependencies are compiled once into Go's build cache, so the first build pays for them
and the others add only their own packages and a link.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tools.bootstrap.go import (
    crd_documents,
    go_recipe,
    go_version,
    required_version,
    static_build,
)
from tools.bootstrap.pulumi import module_dir
from tools.bootstrap.tool import GO_DIR, Tool

OPERATORS_DIR = GO_DIR / "operators"


@dataclass(frozen=True)
class Operator:
    """One operator release: its module, its main package, and the files taken from it."""

    name: str
    module: str
    package: str
    files: dict[str, str]
    """Cached file -> folder (its *.yaml documents, concatenated) or file in the module."""
    version_variable: str = ""
    """The variable the upstream Makefile stamps the release into (`-X`), if any."""

    @property
    def binary(self) -> str:
        return self.name

    @property
    def binaries(self) -> tuple[str, ...]:
        return (self.binary, *self.files)


OPERATORS = (
    Operator(
        name="jobset",
        module="sigs.k8s.io/jobset",
        package="sigs.k8s.io/jobset",
        files={"jobset-crds.yaml": "config/components/crd/bases"},
        version_variable="sigs.k8s.io/jobset/pkg/version.GitVersion",
    ),
    Operator(
        name="lws",
        module="sigs.k8s.io/lws",
        package="sigs.k8s.io/lws/cmd",
        files={"lws-crds.yaml": "config/crd/bases"},
        version_variable="sigs.k8s.io/lws/pkg/version.GitVersion",
    ),
    Operator(
        name="kuberay",
        module="github.com/ray-project/kuberay/ray-operator",
        package="github.com/ray-project/kuberay/ray-operator",
        files={"kuberay-crds.yaml": "config/crd/bases"},
    ),
    Operator(
        name="trainer",
        module="github.com/kubeflow/trainer/v2",
        package="github.com/kubeflow/trainer/v2/cmd/trainer-controller-manager",
        files={
            "trainer-crds.yaml": "manifests/base/crds",
            # The runtime TrainJobs name (`runtimeRef: torch-distributed`) as the release
            # installs it; the local fleet adds Volcano's gang policy to it.
            "trainer-torch-runtime.yaml": "manifests/base/runtimes/torch_distributed.yaml",
        },
    ),
)


def build_operator(operator: Operator) -> Callable[[Tool, Path], None]:
    def build(tool: Tool, out: Path) -> None:
        # As the upstream Dockerfiles: static binaries.
        ldflags = "-s -w"
        if operator.version_variable:
            ldflags += f" -X {operator.version_variable}={tool.version}"
        env = static_build(
            tool,
            out,
            module_dir=OPERATORS_DIR,
            package=operator.package,
            binary=operator.binary,
            ldflags=ldflags,
        )
        release = module_dir(tool, OPERATORS_DIR, operator.module, tool.version, env=env)
        for name, relative in operator.files.items():
            source = release / relative
            if source.is_dir():
                (out / name).write_text(crd_documents([source]))
            else:
                shutil.copyfile(source, out / name)
                (out / name).chmod(0o644)

    return build


def operator_tools() -> list[Tool]:
    go_key = go_version()
    return [
        Tool(
            name=operator.name,
            version=required_version(OPERATORS_DIR, operator.module),
            binaries=operator.binaries,
            obtain=build_operator(operator),
            recipe=go_recipe(OPERATORS_DIR),
            extra_key=go_key + repr(operator),
        )
        for operator in OPERATORS
    ]
