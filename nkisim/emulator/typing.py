"""`nki.typing`: annotations for kernel tensor parameters, `nt.tensor[128, 512]` (NKI 0.6 migration
guide, "nki.typing module": https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/migration/index.html).
They document the expected shape; like any Python annotation they do not change how the kernel runs."""
from __future__ import annotations

from typing import Any


class TensorAnnotation:
    """What `nt.tensor[dims]` evaluates to: the declared shape."""

    def __init__(self, shape: tuple[Any, ...]) -> None:
        self.shape = shape

    def __repr__(self) -> str:
        return f"nt.tensor[{', '.join(map(str, self.shape))}]"


class tensor:  # noqa: N801  (the documented spelling)
    """`nt.tensor[d0, d1, ...]` annotates a kernel parameter with its shape."""

    def __class_getitem__(cls, dims: Any) -> TensorAnnotation:
        return TensorAnnotation(dims if isinstance(dims, tuple) else (dims,))
