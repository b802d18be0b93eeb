"""`dma_compute`: element-wise sums computed by the DMA engines.

Source: https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.dma_compute.html
dst = srcs[0] + srcs[1] + ... (up to 16 sources, equal element counts, HBM or SBUF), read as
fp32, summed in fp32 in list order, cast once to dst's dtype. reduce_op must be nl.add and every
scale 1.0 ("Currently, only nl.add is supported for reduce_op, and all values in scales must be 1.0", in
NKI 0.6 and 0.7). With a `vector_offset` (indirect) view it is a read-modify-write of one of the two
documented forms, exactly two sources:
  * scatter RMW: dst is an indirect HBM view, one source is that same view, the other SBUF data:
    dst[indices] = dst[indices] + src; the indices must not repeat (unique_indices must be True:
    "non-unique indices not yet supported"): an index tile that addresses an element twice warns (the
    toolchain cannot see index values; what trn2 writes is undocumented, nkisim keeps the last update);
  * gather RMW: dst is SBUF, one source is dst itself, the other an indirect HBM view:
    dst = dst + src[indices].
Rows whose index is out of bounds fail (oob_mode.error) or are left as they were (oob_mode.skip).
"""
from __future__ import annotations

import warnings
from typing import Any

import numpy as np
import torch

from . import dtypes, views
from ..vocabulary import DMA, instruction
from .enums import oob_mode
from .errors import NkiWarning
from .issue import Issue, NkiInstruction, rows_f32, spelled
from .ops import OPS
from .tensor import PSUM, NkiTensor, contiguous_pieces
from .trace import DmaInfo

MAX_SOURCES = 16
_OobMode = oob_mode


@instruction("DMA_COMPUTE", engines=(DMA,), cost=None, color="#0b5394")
def dma_compute(dst: NkiTensor, srcs: Any, reduce_op: Any, scales: Any = None, unique_indices: bool = True,
                oob_mode: Any = oob_mode.error, name: str | None = None) -> NkiInstruction:
    """dst = the fp32 sum of srcs, cast to dst's dtype (DMA engines)."""
    c = Issue("dma_compute", name)
    dst = c.tensor("dst", dst, on_chip=False, indirect=True)
    if not isinstance(srcs, (list, tuple)) or not 1 <= len(srcs) <= MAX_SOURCES:
        c.fail(f"srcs must be a list of 1 to {MAX_SOURCES} tensors, got {srcs!r}")
    srcs = [c.tensor(f"srcs[{i}]", s, on_chip=False, indirect=True) for i, s in enumerate(srcs)]
    for role, t in [("dst", dst)] + [(f"srcs[{i}]", s) for i, s in enumerate(srcs)]:
        if t.buffer is PSUM:
            c.fail(f"{role} is in psum; dma_compute reads and writes HBM or SBUF")
        if t.size != dst.size:
            c.fail(f"{role} has {t.size} elements but dst has {dst.size}; element counts must match")
    if c.op("reduce_op", reduce_op, "any") is not OPS["add"]:
        c.fail(f"reduce_op={spelled(reduce_op)} is not supported; dma_compute supports only nl.add (its page)")
    if scales is not None and (len(scales) != len(srcs) or any(float(s) != 1.0 for s in scales)):
        c.fail(f"scales={scales!r}: every scale must be 1.0 (or scales=None), one per source (dma_compute's page)")
    if unique_indices is not True:
        c.fail("unique_indices must be True (non-unique indices are not supported yet)")
    c.enum("oob_mode", oob_mode, _OobMode)
    chip = next((t for t in [dst] + srcs if t.buffer.on_chip), None)
    parts = chip.partitions if chip is not None else 1
    nbytes = dst.arr.nbytes
    src_side = "sbuf" if any(s.buffer.on_chip for s in srcs) else "hbm"
    operands = [("dst", dst)] + [(f"srcs[{i}]", s) for i, s in enumerate(srcs)]
    indexes = [(f"{role} index", t.indirection.index) for role, t in operands if t.indirection is not None]
    indirect = bool(indexes)
    info = DmaInfo(f"{src_side}->{'sbuf' if dst.buffer.on_chip else 'hbm'}", nbytes, parts, nbytes // parts, "none",
                   "none", any(s.dtype != dst.dtype for s in srcs), 0 if indirect else contiguous_pieces(dst, *srcs))
    if indirect:
        _check_read_modify_write(c, dst, srcs)
    ins = c.record(DMA, [(f"srcs[{i}]", s) for i, s in enumerate(srcs)] + indexes, [("dst", dst)],
                   {"reduce_op": "add", "sources": len(srcs), "dtype": dst.dtype.name}, dma=info,
                   epp=chip.elements_per_partition if chip is not None else dst.size)
    race = c.race_check(srcs, [dst], oob_skip=oob_mode is _OobMode.skip)
    if c.prog.compute and indirect:
        _read_modify_write(c, dst, srcs, oob_mode is _OobMode.skip)
    elif c.prog.compute:
        total = rows_f32(srcs[0]).reshape(-1).clone()
        for s in srcs[1:]:
            total += rows_f32(s).reshape(-1)
        dtypes.store(dst.arr, total)
    race()
    return ins


def _check_read_modify_write(c: Issue, dst: NkiTensor, srcs: list[NkiTensor]) -> None:
    forms = ("the documented forms are scatter RMW (dst an indirect HBM view, srcs=[dst, sbuf_data]) and "
             "gather RMW (dst in SBUF, srcs=[dst, hbm.ap(..., vector_offset=indices)])")
    if len(srcs) != 2:
        c.fail(f"a read-modify-write dma_compute (an operand with vector_offset) takes exactly 2 srcs, got "
               f"{len(srcs)}; {forms}")
    for role, t in [("dst", dst), ("srcs[0]", srcs[0]), ("srcs[1]", srcs[1])]:
        if t.indirection is not None and (t.indirection.kind != "vector" or t.buffer.on_chip):
            c.fail(f"{role} is indirect through a {t.indirection.kind} offset on {t.buffer.name}; dma_compute's "
                   f"read-modify-write indexes an HBM view by vector_offset; {forms}")
    same = [_same_elements(dst, s) for s in srcs]
    other = srcs[1] if same[0] else srcs[0]
    scatter = dst.indirection is not None and any(same) and other.buffer.on_chip and other.indirection is None
    gather = (dst.indirection is None and dst.buffer.on_chip and any(same) and other.indirection is not None)
    if not (scatter or gather):
        c.fail(f"this read-modify-write matches neither form; {forms}")


def _same_elements(a: NkiTensor, b: NkiTensor) -> bool:
    """Whether two views address the same elements of the same storage (indices as they are now)."""
    if a.storage is not b.storage or a.shape != b.shape:
        return False
    never = lambda msg: None  # noqa: E731  (out-of-bounds rows are judged when the instruction runs)
    return bool(np.array_equal(views.element_indices(a, True, never)[1], views.element_indices(b, True, never)[1]))


def _read_modify_write(c: Issue, dst: NkiTensor, srcs: list[NkiTensor], skip: bool) -> None:
    d_flat, d_idx, ok = views.element_indices(dst, skip, c.fail)
    if dst.indirection is not None:
        targets, counts = np.unique(d_idx[ok], return_counts=True)
        if (counts > 1).any():
            warnings.warn(NkiWarning(
                f"{c.label}: the scatter's vector_offset indices address {int((counts > 1).sum())} elements of dst more "
                f"than once (element {int(targets[counts > 1][0])} of the HBM tensor {int(counts.max())} times), but "
                f"unique_indices is True and the dma_compute page says non-unique indices are \"not yet supported\": "
                f"what trn2 writes there is not documented (nkisim keeps the last update); sum the updates of repeated "
                f"rows first ({c.where})"), stacklevel=4)
    total = None
    for s in srcs:
        s_flat, s_idx, s_ok = views.element_indices(s, skip, c.fail)
        ok = ok & s_ok
        part = dtypes.load_f32(np.ascontiguousarray(s_flat[s_idx]))
        total = part.clone() if total is None else total + part
    result = np.empty(int(ok.sum()), dst.dtype)
    dtypes.store(result, total[torch.from_numpy(ok)])
    d_flat[d_idx[ok]] = result


__all__ = ["dma_compute"]
