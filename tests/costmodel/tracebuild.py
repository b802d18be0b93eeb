"""Build synthetic instruction traces from the trace dataclasses, for cost-model tests that must not
depend on the emulator (scheduler invariants, dge ordering, LNC scaling)."""
from __future__ import annotations

import itertools

from nkisim import vocabulary
from nkisim.emulator.trace import DmaInfo, Instruction, Operand, Region, Trace

ITEMSIZE = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3": 1, "int32": 4}


class TraceBuilder:
    """Appends instructions for one launch; storages get fresh ids from `alloc`."""

    def __init__(self, kernel: str = "synthetic", lnc: int = 1) -> None:
        self.trace = Trace(kernel=kernel, lnc=lnc)
        self._ids = itertools.count(1)
        self._index: dict[int, int] = {}

    def alloc(self) -> int:
        return next(self._ids)

    @staticmethod
    def sbuf(storage: int, p: int, n: int, dtype: str = "bfloat16", role: str = "data", p_lo: int = 0,
             f_lo: int = 0, buffer: str = "sbuf") -> Operand:
        return Operand(role, buffer, dtype, (p, n), p, n, ITEMSIZE[dtype], True,
                       Region(storage, p_lo, p_lo + p, f_lo, f_lo + n, ITEMSIZE[dtype]))

    @staticmethod
    def hbm(storage: int, start: int, count: int, dtype: str = "bfloat16", role: str = "src") -> Operand:
        return Operand(role, "hbm", dtype, (count,), 1, count, ITEMSIZE[dtype], True,
                       Region(storage, 0, 1, start, start + count, ITEMSIZE[dtype]))

    def _append(self, program: int, **kw) -> Instruction:
        index = self._index.get(program, 0)
        self._index[program] = index + 1
        ins = Instruction(index=index, program_id=program, source="synthetic.py:1", **kw)
        self.trace.instructions.append(ins)
        return ins

    def dma(self, dst: Operand, src: Operand, dge_mode: str = "unknown", program: int = 0,
            name: str | None = None, queue: str | None = None) -> Instruction:
        on_chip = dst if dst.buffer == "sbuf" else src
        direction = f"{'sbuf' if src.buffer == 'sbuf' else 'hbm'}->{'sbuf' if dst.buffer == 'sbuf' else 'hbm'}"
        info = DmaInfo(direction, dst.nbytes, on_chip.partitions, on_chip.elements_per_partition * on_chip.itemsize,
                       dge_mode, vocabulary.dma_queue(dge_mode, queue), False)
        return self._append(program, isa="dma_copy", opcode="DMA", engine="DMA", name=name,
                            elements_per_partition=on_chip.elements_per_partition, partitions=on_chip.partitions,
                            reads=(src,), writes=(dst,), dma=info)

    def compute(self, engine: str, isa: str, dst: Operand, *srcs: Operand, program: int = 0,
                name: str | None = None, **attrs) -> Instruction:
        """One registered compute instruction (`isa` is its nki.isa name) on `engine`."""
        opcode = vocabulary.spec(isa).opcode
        return self._append(program, isa=isa, opcode=opcode, engine=engine, name=name,
                            elements_per_partition=dst.elements_per_partition, partitions=dst.partitions,
                            reads=srcs, writes=(dst,), attrs=attrs)


def gelu_like(rows: int, cols: int, backward: bool = False, dge_mode: str = "unknown", lnc: int = 1,
              dtype: str = "bfloat16") -> Trace:
    """The published GELU kernels' instruction pattern: per 128-row tile DMA in (x, and grad_out
    for backward), one ACTIVATE, (a Vector multiply), DMA out; rows split over `lnc` programs."""
    b = TraceBuilder("gelu_bwd" if backward else "gelu_fwd", lnc)
    x, g, out = b.alloc(), b.alloc(), b.alloc()
    per_program = rows // lnc
    for program in range(lnc):
        for r0 in range(program * per_program, (program + 1) * per_program, 128):
            p = min(128, (program + 1) * per_program - r0)
            xt = b.sbuf(b.alloc(), p, cols, dtype)
            b.dma(xt, b.hbm(x, r0 * cols, p * cols, dtype), dge_mode, program, name="load_x")
            yt = b.sbuf(b.alloc(), p, cols, dtype, role="dst")
            act = "gelu_dx" if backward else "gelu"
            b.compute("Scalar", "activation", yt, xt, program=program, name=act, func=act)
            if backward:
                gt = b.sbuf(b.alloc(), p, cols, dtype)
                b.dma(gt, b.hbm(g, r0 * cols, p * cols, dtype), dge_mode, program, name="load_grad")
                dx = b.sbuf(b.alloc(), p, cols, dtype, role="dst")
                b.compute("Vector", "tensor_tensor", dx, yt, gt, program=program, name="mul", op="multiply")
                yt = dx
            b.dma(b.hbm(out, r0 * cols, p * cols, dtype, role="dst"), yt, dge_mode, program, name="store")
    return b.trace


def loads_and_stores(store_queue: str, tiles: int = 16) -> Trace:
    """`tiles` independent hwdge loads on the Sync queue and stores on `store_queue`, interleaved."""
    b = TraceBuilder("two_queues")
    for _ in range(tiles):
        b.dma(b.sbuf(b.alloc(), 128, 2048), b.hbm(b.alloc(), 0, 128 * 2048), "hwdge", queue="Sync")
        b.dma(b.hbm(b.alloc(), 0, 128 * 2048, role="dst"), b.sbuf(b.alloc(), 128, 2048, role="src"),
              "hwdge", queue=store_queue)
    return b.trace


def many_small_dmas(dge_mode: str, count: int = 64) -> Trace:
    """`count` independent [128, 256] bf16 loads from consecutive pieces of one HBM tensor."""
    b = TraceBuilder("small_dmas")
    src = b.alloc()
    for i in range(count):
        b.dma(b.sbuf(b.alloc(), 128, 256), b.hbm(src, i * 128 * 256, 128 * 256), dge_mode)
    return b.trace
