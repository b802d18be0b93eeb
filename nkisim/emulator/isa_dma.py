"""`dma_compute`: element-wise sums computed by the DMA engines.

Source: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.dma_compute.html
dst = srcs[0] + srcs[1] + ... (up to 16 sources, equal element counts, HBM or SBUF), read as
fp32, summed in fp32 in list order, cast once to dst's dtype. In NKI 0.6 reduce_op must be nl.add
and every scale 1.0. The read-modify-write forms with a `vector_offset` (indirect) source are
not emulated here: they need indirect access patterns (`.ap(vector_offset=...)`).
"""
from __future__ import annotations

from typing import Any

from . import dtypes
from ..vocabulary import DMA, instruction
from .enums import oob_mode
from .issue import Issue, NkiInstruction, rows_f32
from .ops import OPS
from .tensor import PSUM, NkiTensor
from .trace import DmaInfo

MAX_SOURCES = 16
_OobMode = oob_mode


@instruction("DMA_COMPUTE", engines=(DMA,), cost=None, color="#0b5394")
def dma_compute(dst: NkiTensor, srcs: Any, reduce_op: Any, scales: Any = None, unique_indices: bool = True,
                oob_mode: Any = oob_mode.error, name: str | None = None) -> NkiInstruction:
    """dst = the fp32 sum of srcs, cast to dst's dtype (DMA engines)."""
    c = Issue("dma_compute", name)
    dst = c.tensor("dst", dst, on_chip=False)
    if not isinstance(srcs, (list, tuple)) or not 1 <= len(srcs) <= MAX_SOURCES:
        c.fail(f"srcs must be a list of 1 to {MAX_SOURCES} tensors, got {srcs!r}")
    srcs = [c.tensor(f"srcs[{i}]", s, on_chip=False) for i, s in enumerate(srcs)]
    for role, t in [("dst", dst)] + [(f"srcs[{i}]", s) for i, s in enumerate(srcs)]:
        if t.buffer is PSUM:
            c.fail(f"{role} is in psum; dma_compute reads and writes HBM or SBUF")
        if t.size != dst.size:
            c.fail(f"{role} has {t.size} elements but dst has {dst.size}; element counts must match")
    if c.op("reduce_op", reduce_op, "any") is not OPS["add"]:
        c.fail(f"reduce_op={reduce_op!r} is not supported; NKI 0.6 supports only nl.add")
    if scales is not None and (len(scales) != len(srcs) or any(float(s) != 1.0 for s in scales)):
        c.fail(f"scales={scales!r}: NKI 0.6 requires every scale to be 1.0 (or scales=None), one per source")
    if unique_indices is not True:
        c.fail("unique_indices must be True (non-unique indices are not supported yet)")
    c.enum("oob_mode", oob_mode, _OobMode)
    chip = next((t for t in [dst] + srcs if t.buffer.on_chip), None)
    parts = chip.partitions if chip is not None else 1
    nbytes = dst.arr.nbytes
    src_side = "sbuf" if any(s.buffer.on_chip for s in srcs) else "hbm"
    info = DmaInfo(f"{src_side}->{'sbuf' if dst.buffer.on_chip else 'hbm'}", nbytes, parts, nbytes // parts, "none",
                   "none", any(s.dtype != dst.dtype for s in srcs))
    ins = c.record(DMA, [(f"srcs[{i}]", s) for i, s in enumerate(srcs)], [("dst", dst)],
                   {"reduce_op": "add", "sources": len(srcs), "dtype": dst.dtype.name}, dma=info,
                   epp=chip.elements_per_partition if chip is not None else dst.size)
    race = c.race_check(srcs, [dst])
    if c.prog.compute:
        total = rows_f32(srcs[0]).reshape(-1).clone()
        for s in srcs[1:]:
            total += rows_f32(s).reshape(-1)
        dtypes.store(dst.arr, total)
    race()
    return ins


__all__ = ["dma_compute"]
