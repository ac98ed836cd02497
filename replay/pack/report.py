"""Pack mode's figures: per policy, the share of GPUs unallocated and the fragmentation at
each percent of arrived work (mean and spread over the draws), next to the paper's, as a
table (Markdown), a plot (PNG) and a JSON document."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from replay.pack.experiment import PERCENTS, Result

REPORTED_AT = (80, 90, 100, 110, 120, 130)
"""Percents of arrived work the table shows."""

PAPER_SOURCE = (
    "Weng et al., ATC 2023, Fig. 7 and 11-13, as the authors publish them with their simulator "
    "(hkust-adsl/kubernetes-scheduler-simulator, experiments/analysis/expected_results/"
    "analysis_allo_discrete.csv: 100 - allocation rate, mean ± standard deviation of 10 "
    "draws, workload tuned to 130 %)"
)
PAPER_UNALLOCATED: dict[str, dict[str, dict[int, tuple[float, float]]]] = {
    "openb_pod_list_default.csv": {
        "random": {100: (13.70, 0.31), 130: (12.53, 0.30)},
        "dot-product": {100: (9.38, 0.18), 130: (9.15, 0.19)},
        "gpu-packing": {100: (8.22, 0.50), 130: (8.00, 0.52)},
        "best-fit": {100: (7.14, 0.14), 130: (6.92, 0.13)},
        "fgd": {100: (4.77, 0.10), 130: (4.61, 0.08)},
    },
    "openb_pod_list_gpushare40.csv": {
        "random": {100: (15.14, 0.32), 130: (14.00, 0.34)},
        "dot-product": {100: (10.70, 0.13), 130: (10.44, 0.13)},
        "gpu-packing": {100: (10.23, 0.50), 130: (9.97, 0.48)},
        "best-fit": {100: (8.56, 0.19), 130: (8.31, 0.20)},
        "fgd": {100: (6.04, 0.07), 130: (5.85, 0.06)},
    },
    "openb_pod_list_multigpu30.csv": {
        "random": {100: (13.37, 0.44), 130: (10.73, 0.39)},
        "dot-product": {100: (6.89, 0.30), 130: (6.72, 0.29)},
        "gpu-packing": {100: (5.30, 0.30), 130: (5.13, 0.30)},
        "best-fit": {100: (5.43, 0.22), 130: (5.28, 0.21)},
        "fgd": {100: (3.64, 0.09), 130: (3.54, 0.08)},
    },
    "openb_pod_list_gpuspec33.csv": {
        "random": {100: (16.13, 0.25), 130: (13.54, 0.13)},
        "dot-product": {100: (20.18, 0.24), 130: (10.86, 0.36)},
        "gpu-packing": {100: (17.78, 0.37), 130: (6.78, 0.59)},
        "best-fit": {100: (19.61, 0.26), 130: (6.91, 0.14)},
        "fgd": {100: (12.16, 0.17), 130: (5.45, 0.14)},
    },
}
"""Percent of GPUs unallocated at 100 % and 130 % of arrived work, per published pod list."""


def summary(result: Result) -> dict[str, Any]:
    """Mean and standard deviation of the curves per policy, and the paper's figures."""
    name = Path(result.trace).name
    paper = PAPER_UNALLOCATED.get(name, {})
    policies: dict[str, Any] = {}
    for policy, runs in result.runs.items():
        unallocated = np.vstack([r.unallocated for r in runs])
        fragmentation = np.vstack([r.fragmentation for r in runs])
        policies[policy] = {
            "draws": len(runs),
            "seeds": [r.seed for r in runs],
            "pods": int(np.mean([r.pods for r in runs])),
            "failed": float(np.mean([r.failed for r in runs])),
            "seconds_per_draw": round(float(np.mean([r.seconds for r in runs])), 2),
            "cpu_seconds_per_draw": round(float(np.mean([r.cpu_seconds for r in runs])), 2),
            "unallocated_mean": np.round(unallocated.mean(axis=0), 3).tolist(),
            "unallocated_std": np.round(unallocated.std(axis=0), 3).tolist(),
            "fragmentation_mean": np.round(fragmentation.mean(axis=0), 3).tolist(),
            "fragmentation_std": np.round(fragmentation.std(axis=0), 3).tolist(),
            "paper_unallocated": {str(k): list(v) for k, v in paper.get(policy, {}).items()},
        }
    return {
        "trace": result.trace,
        "nodes": result.nodes,
        "gpus": result.gpus,
        "percents": PERCENTS.tolist(),
        "policies": policies,
        "paper_source": PAPER_SOURCE,
    }


def table(document: dict[str, Any]) -> str:
    """Unallocated GPUs (and fragmentation) per policy at the reported percents."""
    head = ["policy"] + [f"{p} %" for p in REPORTED_AT] + ["paper 100 %", "paper 130 %"]
    rows = [head]
    for policy, f in document["policies"].items():
        cells = [policy]
        for p in REPORTED_AT:
            cells.append(
                f"{f['unallocated_mean'][p]:.2f} ± {f['unallocated_std'][p]:.2f} "
                f"({f['fragmentation_mean'][p]:.2f})"
            )
        for at in ("100", "130"):
            ref = f["paper_unallocated"].get(at)
            cells.append(f"{ref[0]:.2f} ± {ref[1]:.2f}" if ref else "—")
        rows.append(cells)
    lines = ["| " + " | ".join(r) + " |" for r in rows]
    lines.insert(1, "|" + "---|" * len(head))
    return "\n".join(lines)


def write(directory: Path, document: dict[str, Any]) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    paths = {"json": directory / "pack.json", "report": directory / "pack.md"}
    paths["json"].write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    plot = _plot(directory, document)
    text = [
        f"# Pack mode: {Path(document['trace']).name} on {document['nodes']:,} nodes "
        f"({document['gpus']:,} GPUs)",
        "",
        "Percent of the cluster's GPUs unallocated, mean ± standard deviation over the draws "
        "(in brackets: the fragmentation measure, percent of all GPUs), against the arrived "
        "work as a percent of the cluster's GPUs. Paper: " + document["paper_source"] + ".",
        "",
        table(document),
        "",
    ]
    if plot is not None:
        paths["plot"] = plot
        text += [f"![unallocated GPUs]({plot.name})", ""]
    paths["report"].write_text("\n".join(text), encoding="utf-8")
    return paths


def _plot(directory: Path, document: dict[str, Any]) -> Path | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    x = np.array(document["percents"])
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    for policy, f in document["policies"].items():
        for ax, key in zip(axes, ("unallocated", "fragmentation"), strict=True):
            mean = np.array(f[f"{key}_mean"])
            std = np.array(f[f"{key}_std"])
            ax.plot(x, mean, label=policy)
            ax.fill_between(x, mean - std, mean + std, alpha=0.2)
    axes[0].set_ylabel("GPUs unallocated (%)")
    axes[1].set_ylabel("fragmentation (% of GPUs)")
    for ax in axes:
        ax.set_xlabel("arrived work (% of the cluster's GPUs)")
        ax.set_xlim(60, x[-1])
        ax.set_ylim(0, 30)
        ax.grid(alpha=0.3)
    axes[0].legend()
    fig.suptitle(Path(document["trace"]).name)
    fig.tight_layout()
    path = directory / f"pack-{Path(document['trace']).stem}.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
