"""Who holds the GPU on a node: now `controller.nodeflow.consumers`, shared by every node
workflow; these names stay importable from here."""

from __future__ import annotations

from controller.nodeflow.consumers import (
    MIRROR_ANNOTATION as MIRROR_ANNOTATION,
)
from controller.nodeflow.consumers import (
    NO_DEVICES as NO_DEVICES,
)
from controller.nodeflow.consumers import (
    Role as Role,
)
from controller.nodeflow.consumers import (
    controller_kind as controller_kind,
)
from controller.nodeflow.consumers import (
    gpu_use as gpu_use,
)
from controller.nodeflow.consumers import (
    pod_role as pod_role,
)
from controller.nodeflow.consumers import (
    uses_gpu as uses_gpu,
)
