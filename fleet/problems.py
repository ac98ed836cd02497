"""Problems a configuration can have that both readers of it report: the typed model
(fleet/config/, for a stack file) and the controller (controller/config.py, for the rendered
document, without pydantic). Written once so both say the same words."""

from __future__ import annotations


def grace_longer_than_window(grace_seconds: float, window_seconds: float) -> str:
    """The problem of an idle rule whose grace outlasts its window."""
    return (
        f"{grace_seconds:g}s is longer than idle.window_seconds ({window_seconds:g}s): a warning "
        "counts only inside one window, so the pod would be warned again every window and never "
        "reclaimed; make grace_seconds at most window_seconds"
    )
