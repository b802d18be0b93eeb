"""DMA transposes move data slower than copies: "up to 90% DMA throughput utilization" HBM -> SBUF and
"up to 50%" SBUF -> SBUF on trn2 (SDK:nki/guides/architecture/trainium2_arch.rst "DMA Transpose")."""
from __future__ import annotations

from nkisim.costmodel import constants as K
from nkisim.emulator.trace import Instruction


def transpose_efficiency(ins: Instruction) -> float:
    """The fraction of a copy's DMA throughput this transfer reaches (1.0 for anything but a transpose)."""
    if not ins.attrs.get("transpose"):
        return 1.0
    return K.DMA_TRANSPOSE_SBUF_EFFICIENCY if ins.dma.direction == "sbuf->sbuf" else K.DMA_TRANSPOSE_EFFICIENCY
