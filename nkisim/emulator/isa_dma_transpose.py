"""`nisa.dma_transpose`: a transpose done by the DMA engines while moving data HBM -> SBUF or
SBUF -> SBUF, and its indirect form (a gather-transpose: `src` is an HBM view made by
`.ap(vector_offset=indices, indirect_dim=0)`).

Rules from the NKI 0.6 API reference (SDK:nki/api/nki/isa/__init__.py, rendered at
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.dma_transpose.html),
the DGE deep dive (SDK:nki/deep-dives/nki-dge.rst) and SDK:nki/guides/architecture/trainium2_arch.rst
"DMA Transpose":
  * permutation by rank: 2-D (1, 0), 3-D (2, 1, 0), 4-D (3, 1, 2, 0); `axes` may only spell that one;
  * dst in SBUF, src in HBM or SBUF, equal dtypes, 2- or 4-byte elements (bit-accurate on trn2);
  * dge_mode: a direct transpose takes only unknown or hwdge ("DMA Direct Transpose Constraints" of the
    API page, every release from 2.29 to the 2.33-era latest); swdge is the indirect form's. The DGE page's
    table lists none for a static dma_transpose too; where the two disagree the instruction's API reference
    wins, so none is refused. hwdge adds: 2-byte dtype, src.shape[-1] <= 128,
    2-D src.shape[0] == 16, 3-D/4-D src.shape[0] in {1, 2, 4, 8, 16} with src.shape[0] * src.shape[-2]
    a multiple of 16 (the DGE page's "src.shape[-1] % 128 == 0" contradicts "<= 128"; the API page wins);
  * priority is NeuronCore-v4 only; oob_mode=skip only with indirect indexing: the gather form, or a
    scalar_offset source (NKI 0.5.0 notes), whose whole transfer an out-of-bounds offset skips.
  * indirect form ("DMA Indirect Transpose Constraints"): dge_mode unknown or swdge; src on HBM,
    2-byte dtype, src.shape[0] divisible by 16, a 4-D src with shape[1] or shape[2] equal to 1
    (src.shape[-1] <= 128 is the dst's partition limit); indices a 2-D uint32 SBUF tile [P, N],
    P in 16..128 and divisible by 16, P == 128 when N > 1, P * N >= src.shape[0] (the `.ap`
    check). It computes `gathered = src[indices.T.flatten()[:src.shape[0]]]`, then transposes it.
Like `dma_copy` with dge_mode unknown, an unknown-mode transpose is costed as software DGE.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ..vocabulary import DMA, dma_queue, instruction
from . import dtypes, views
from .enums import dge_mode, oob_mode
from .issue import Issue, NkiInstruction
from .tensor import PSUM, SBUF, NkiTensor
from .trace import DmaInfo

PERMUTATION = {2: (1, 0), 3: (2, 1, 0), 4: (3, 1, 2, 0)}
HWDGE_SRC_ROWS = (1, 2, 4, 8, 16)


def transposed(src: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """The permuted array, raw bits, contiguous."""
    return np.ascontiguousarray(dtypes.raw(src).transpose(axes))


@instruction("DMA_TRANSPOSE", engines=(DMA,), cost=None, color="#7fbf8e")
def dma_transpose(dst: NkiTensor, src: NkiTensor, axes: Any = None, priority: Any = None,
                  dge_mode: Any = dge_mode.unknown, oob_mode: Any = oob_mode.error,
                  name: str | None = None) -> NkiInstruction:
    """dst = src permuted by PERMUTATION[src.ndim], moved by the DMA engines; see the module doc."""
    c = Issue("dma_transpose", name)
    c.enum("dge_mode", dge_mode, _DgeMode)
    c.enum("oob_mode", oob_mode, _OobMode)
    skip = oob_mode is _OobMode.skip
    # a vector_offset source is the gather form; a scalar_offset one is read at its run-time offset, and with
    # oob_mode.skip (NKI 0.5.0: "dma_transpose with scalar_offset now supports oob_mode.skip for runtime indirect
    # indexing") an offset out of bounds skips the transfer, so the view stays indirect until it runs
    kind = src.indirection.kind if isinstance(src, NkiTensor) and src.indirection is not None else None
    gather = kind == "vector"
    dst = c.tensor("dst", dst, on_chip=False)
    src = c.tensor("src", src, on_chip=False, indirect=gather or (kind == "scalar" and skip))
    if dst.buffer is not SBUF:
        c.fail(f"dst is in {dst.buffer.name}; dma_transpose writes to SBUF")
    if src.buffer is PSUM:
        c.fail("src is in psum; dma_transpose reads HBM or SBUF (copy PSUM to SBUF with nisa.tensor_copy first)")
    if priority is not None:
        c.fail(f"priority={priority!r} is NeuronCore-v4 (trn3) only; trn2 DMAs take no priority")
    indirect = src.indirection is not None
    if gather:
        _indirect_limits(c, src, dge_mode)
    else:
        if skip and not indirect:
            c.fail("oob_mode=skip is only valid when src uses indirect indexing (.ap(vector_offset=...) or "
                   ".ap(scalar_offset=...))")
        # The API reference allows only unknown and hwdge here (the DGE page's "none" loses: module doc).
        if dge_mode is _DgeMode.swdge:
            c.fail("dge_mode=swdge is the indirect (gather) transpose; a direct dma_transpose takes dge_mode unknown "
                   "or hwdge")
        if dge_mode is _DgeMode.none:
            c.fail("dge_mode=none: a direct dma_transpose takes dge_mode unknown or hwdge (nki.isa.dma_transpose, "
                   "'DMA Direct Transpose Constraints'); use dge_mode.unknown to let the compiler choose")
    perm = PERMUTATION.get(src.ndim)
    if perm is None:
        c.fail(f"src is {src.ndim}-D {src.shape}; dma_transpose takes 2-D, 3-D or 4-D tensors")
    if axes is not None and tuple(axes) != perm:
        c.fail(f"axes={axes!r}: a {src.ndim}-D dma_transpose permutes by {perm} (supported axes: "
               f"{', '.join(str(p) for p in PERMUTATION.values())})")
    if src.dtype != dst.dtype:
        c.fail(f"src dtype {src.dtype.name} != dst dtype {dst.dtype.name}; dma_transpose does not cast")
    if src.dtype.itemsize not in (2, 4):
        c.fail(f"dtype {src.dtype.name} has {src.dtype.itemsize}-byte elements; DMA transpose moves 2- or 4-byte "
               f"elements")
    if dge_mode is _DgeMode.hwdge:
        _hwdge_limits(c, src)
    shape = tuple(src.shape[a] for a in perm)
    if dst.shape[0] != shape[0] or dst.size != src.size:
        c.fail(f"dst must hold src {src.shape} transposed to {shape} ({shape[0]} partitions), got shape {dst.shape}")
    mode = dge_mode._name_
    queue = dma_queue(mode)
    info = DmaInfo("sbuf->sbuf" if src.buffer is SBUF else "hbm->sbuf", dst.arr.nbytes, dst.partitions,
                   dst.arr.nbytes // dst.partitions, mode, queue, False)
    index = src.indirection.index if indirect else None      # a tile, or a register (a scalar offset)
    reads = [("src", src)] + ([("src index", index)] if isinstance(index, NkiTensor) else [])
    ins = c.record(DMA, reads, [("dst", dst)],
                   {"dge_mode": mode, "dtype": dst.dtype.name, "transpose": True}, dma=info,
                   epp=dst.elements_per_partition)
    c.race_check([src], [], oob_skip=skip)    # dst is in SBUF: only src can be shared
    if c.prog.compute:
        if indirect:
            _gather_transpose(c, dst, src, perm, skip)
        else:
            dtypes.raw(dst.arr)[...] = transposed(src.arr, perm).reshape(dst.shape)
    return ins


def _indirect_limits(c: Issue, src: NkiTensor, mode: Any) -> None:
    ind = src.indirection
    if mode not in (_DgeMode.unknown, _DgeMode.swdge):
        c.fail(f"dge_mode={mode!r}: an indirect dma_transpose is lowered to software DGE; use unknown or swdge")
    if src.buffer.on_chip:
        c.fail(f"src is in {src.buffer.name}; an indirect dma_transpose reads its src from HBM")
    if src.dtype.itemsize != 2:
        c.fail(f"an indirect dma_transpose moves 2-byte dtypes only, got {src.dtype.name}")
    if src.shape[0] % 16:
        c.fail(f"src.shape[0] = {src.shape[0]} must be divisible by 16 (indirect dma_transpose)")
    if src.ndim == 4 and 1 not in (src.shape[1], src.shape[2]):
        c.fail(f"a 4-D indirect dma_transpose needs src.shape[1] or src.shape[2] equal to 1, got {src.shape}")
    index = ind.index
    rows, cols = index.shape
    if index.dtype != np.uint32:
        c.fail(f"the indices tile holds {index.dtype.name}; an indirect dma_transpose takes uint32 indices")
    if not (16 <= rows <= 128 and rows % 16 == 0):
        c.fail(f"indices.shape[0] = {rows} must be in [16, 128] and divisible by 16")
    if cols > 1 and rows != 128:
        c.fail(f"indices {index.shape}: with more than one column, indices.shape[0] must be exactly 128")


def _gather_transpose(c: Issue, dst: NkiTensor, src: NkiTensor, perm: tuple[int, ...], skip: bool) -> None:
    """Rows whose index is out of bounds (a scalar offset: the whole view) fail (oob_mode.error) or leave their dst
    elements as they were."""
    flat, idx, ok = views.element_indices(src, skip, c.fail)
    gathered = dtypes.raw(flat)[idx].reshape(src.shape)
    keep = ~ok.reshape(src.shape)
    result = transposed(gathered, perm).reshape(dst.shape)
    out = dtypes.raw(dst.arr)
    if keep.any():
        out[...] = np.where(transposed(keep, perm).reshape(dst.shape), out, result)
    else:
        out[...] = result


def _hwdge_limits(c: Issue, src: NkiTensor) -> None:
    if src.dtype.itemsize != 2:
        c.fail(f"dge_mode=hwdge transposes 2-byte dtypes only, got {src.dtype.name}")
    rows = src.shape[0]
    if src.ndim == 2 and rows != 16:
        c.fail(f"dge_mode=hwdge: a 2-D src needs exactly 16 rows (src.shape[0] == 16), got {rows}")
    if src.ndim > 2 and (rows not in HWDGE_SRC_ROWS or rows * src.shape[-2] % 16):
        c.fail(f"dge_mode=hwdge: a {src.ndim}-D src needs src.shape[0] in {HWDGE_SRC_ROWS} and src.shape[0] * "
               f"src.shape[-2] a multiple of 16, got {src.shape}")


_DgeMode, _OobMode = dge_mode, oob_mode
