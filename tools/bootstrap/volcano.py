"""Volcano's scheduler, controller manager and webhook manager, one multi-call binary, with the
CRDs and scheduler configuration of the pinned release's Helm chart."""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path

from tools.bootstrap.go import go_env
from tools.bootstrap.pulumi import module_dir
from tools.bootstrap.tool import GO_DIR, BootstrapError, Tool, run

# --- Volcano ----------------------------------------------------------------------------------
#
# vc-scheduler, vc-controller-manager and vc-webhook-manager, one multi-call binary built from the
# wrapper module tools/go/volcano. Volcano v1.15.1 replaces volcano.sh/apis with a nested staging
# module that its module zip leaves out, and the proxy serves no volcano.sh/apis v1.15.x. Diffing
# that staging copy (git tag v1.15.1) against apis v1.14.0 shows one declaration the code needs
# (QueueAllocationGateKey); the rest is comments, kubebuilder markers, the fake clientset and a
# watch-list wrapper in the informers that changes nothing for a real clientset. So the build
# copies apis v1.14.0 into a scratch folder, adds the files under tools/go/volcano/_apis (a folder
# the go command ignores), and the wrapper's go.mod replaces volcano.sh/apis with it.
#
# That go.mod and the overlay's file still name tools/bootstrap.py, the file this package was
# split from: both are part of the recipe hash, so editing them would rebuild Volcano.

VOLCANO_DIR = GO_DIR / "volcano"
VOLCANO_MODULE = "volcano.sh/volcano"
# The apis release the scratch copy starts from, with its go.sum checksum (no go.sum covers a
# module replaced by a folder).
VOLCANO_APIS = ("volcano.sh/apis", "v1.14.0", "h1:Rf8wzGFmgzbyg85GO0CxapDDEk/VM3D7QbjbI/sH+OQ=")
VOLCANO_COMMANDS = ("vc-scheduler", "vc-controller-manager", "vc-webhook-manager")
VOLCANO_CHART = "installer/helm/chart/volcano"
# Files taken from the release's Helm chart, so the product can use the pinned release's CRDs:
# the chart's CRDs, those of its jobflow subchart (JobFlow, JobTemplate; vc-controller-manager's
# jobflow controllers wait for them), and the scheduler configuration the chart deploys.
VOLCANO_FILES = {
    "volcano-crds.yaml": f"{VOLCANO_CHART}/crd/bases",
    "volcano-jobflow-crds.yaml": f"{VOLCANO_CHART}/charts/jobflow/crd/bases",
    "volcano-scheduler.conf": f"{VOLCANO_CHART}/config/volcano-scheduler.conf",
}


def volcano_overlay() -> tuple[Path, ...]:
    return tuple(sorted(p for p in (VOLCANO_DIR / "_apis").rglob("*") if p.is_file()))


def build_volcano(tool: Tool, out: Path) -> None:
    env = go_env()
    # As upstream's Makefile: static binaries.
    env["CGO_ENABLED"] = "0"
    with tempfile.TemporaryDirectory(prefix="volcano-") as scratch:
        work = Path(scratch)
        # Downloads run before go.mod is copied in: outside a module, so that the missing
        # ./apis folder the wrapper's go.mod names does not get in the way.
        release = module_dir(tool, work, VOLCANO_MODULE, tool.version, env=env)
        module, version, checksum = VOLCANO_APIS
        apis = module_dir(tool, work, module, version, env=env, expected_sum=checksum)
        # The CRDs and scheduler configuration are taken from the chart: make sure it is the
        # release's own.
        chart = (release / VOLCANO_CHART / "Chart.yaml").read_text()
        chart_version = re.search(r'^version:\s*"?([^"\s]+)', chart, re.MULTILINE)
        if not chart_version or chart_version.group(1) != tool.version.lstrip("v"):
            raise BootstrapError(
                f"could not obtain {tool.name} {tool.version}: the module's Helm chart is "
                f"version {chart_version.group(1) if chart_version else 'unknown'}"
            )
        for name in ("go.mod", "go.sum", "main.go"):
            shutil.copyfile(VOLCANO_DIR / name, work / name)
        # Module cache files and folders are read-only: copy contents only, then add ours.
        shutil.copytree(apis, work / "apis", copy_function=shutil.copyfile)
        for folder, _, _ in os.walk(work / "apis"):
            Path(folder).chmod(0o755)
        for source in volcano_overlay():
            target = work / "apis" / source.relative_to(VOLCANO_DIR / "_apis")
            if target.exists():
                raise BootstrapError(
                    f"could not obtain {tool.name} {tool.version}: {target.name} would replace "
                    f"a file of {module} {version}; the overlay only adds declarations"
                )
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        ldflags = f"-s -w -X {VOLCANO_MODULE}/pkg/version.Version={tool.version}"
        run(
            tool,
            ["go", "build", "-trimpath", "-ldflags", ldflags, "-o", str(out / "volcano"), "."],
            cwd=work,
            env={**env, "GOFLAGS": (env.get("GOFLAGS", "") + " -mod=readonly").strip()},
        )
    for name in VOLCANO_COMMANDS:
        (out / name).symlink_to("volcano")
    for name, relative in VOLCANO_FILES.items():
        source = release / relative
        if source.is_dir():
            documents = [p.read_text().strip() for p in sorted(source.glob("*.yaml"))]
            (out / name).write_text("---\n" + "\n---\n".join(documents) + "\n")
        else:
            shutil.copyfile(source, out / name)
