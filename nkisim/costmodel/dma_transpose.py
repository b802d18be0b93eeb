"""DMA transposes move data slower than copies (SDK:nki/guides/architecture/trainium2_arch.rst "DMA Transpose"):
"up to 90% DMA throughput utilization" HBM -> SBUF and "up to 50%" SBUF -> SBUF on trn2, and only with
"hardware-friendly" shapes: "all 16x DMA engines ... work co-operatively ... write into a single
[nl.par_dim(128), 16] SBUF tile in parallel at a time, where the 16 elements along free dimension must be
contiguous", so output partitions in multiples of 128 and an innermost free size in multiples of 16 are "a
pre-requisite to achieve best DMA throughput"; other sizes work "at the cost of DMA performance". The model's
reading of that cost: a partly filled block takes as long as a full one."""
from __future__ import annotations

import math

from nkisim.costmodel import constants as K
from nkisim.emulator.trace import Instruction

BLOCK_PARTITIONS, BLOCK_ELEMENTS = 128, 16   # the SBUF tile the 16 engines write together


def is_transpose(ins: Instruction) -> bool:
    return bool(ins.attrs.get("transpose"))


def block_fill(ins: Instruction) -> float:
    """The share of the [128, 16] blocks a transpose writes that its output fills (1.0 for whole blocks)."""
    dst = ins.writes[0]
    inner = dst.shape[-1] if len(dst.shape) > 1 else 1
    return (dst.partitions / (math.ceil(dst.partitions / BLOCK_PARTITIONS) * BLOCK_PARTITIONS)
            * inner / (math.ceil(inner / BLOCK_ELEMENTS) * BLOCK_ELEMENTS))


def transpose_efficiency(ins: Instruction) -> float:
    """The fraction of a copy's DMA throughput (on all 16 engines) this transfer reaches (1.0 for anything but a
    transpose)."""
    if not is_transpose(ins):
        return 1.0
    peak = K.DMA_TRANSPOSE_SBUF_EFFICIENCY if ins.dma.direction == "sbuf->sbuf" else K.DMA_TRANSPOSE_EFFICIENCY
    return peak * block_fill(ins)
