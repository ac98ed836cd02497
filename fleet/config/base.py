"""What every section of the fleet configuration shares: the strict base model, and the field
types with rules of their own (DNS names, clock times, quantities, images by digest, counts or
percentages of nodes)."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PlainValidator

DNS_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"

Name = Annotated[str, Field(pattern=DNS_LABEL, max_length=40)]
"""A name used in Kubernetes and cloud resource names: a DNS-1123 label of at most 40 chars."""

NamespaceName = Annotated[str, Field(pattern=DNS_LABEL, max_length=63)]
Capacity = Literal["any", "spot", "on-demand"]
CapacityType = Literal["on-demand", "spot"]
Day = Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"]
ClockTime = Annotated[str, Field(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$")]
Quantity = Annotated[str, Field(pattern=r"^[0-9]+(\.[0-9]+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?$")]

IMAGE_BY_DIGEST = re.compile(
    r"^(?P<repository>[a-z0-9][a-z0-9._:/-]*?)(:[\w][\w.-]{0,127})?@sha256:[0-9a-f]{64}$"
)


def _image_by_digest(value: Any) -> str:
    if not isinstance(value, str) or not IMAGE_BY_DIGEST.match(value):
        raise ValueError(
            f"{value!r} does not name an image by digest: write REPOSITORY@sha256:<64 hex> "
            "(a tag can be moved to other contents; `fleetplane image build` prints the digest)"
        )
    return value


ImageByDigest = Annotated[str, PlainValidator(_image_by_digest)]
"""`REPOSITORY[:TAG]@sha256:DIGEST`: what runs is decided by the digest, never by a tag alone."""


def _max_unavailable(value: Any) -> int | str:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    if isinstance(value, str) and re.fullmatch(r"([1-9][0-9]?|100)%", value):
        return value
    raise ValueError('must be a number of nodes (1 or more) or a percentage such as "10%"')


MaxUnavailable = Annotated[int | str, PlainValidator(_max_unavailable)]
"""A count or a percentage of nodes, like Kubernetes' IntOrString."""


class ConfigModel(BaseModel):
    """Every section: unknown keys are errors, values are frozen, fields are documented by the
    docstring under them."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        use_attribute_docstrings=True,
    )
