"""What-if rewrites of a recorded trace, for questions the kernel source does not parameterise
(e.g. "this kernel with software DGE instead of dge_mode.none"). The result is still only an input
to the cost model: it was never run."""
from __future__ import annotations

from dataclasses import replace

from nkisim.emulator.trace import Instruction, Trace
from nkisim.vocabulary import BARRIER, dma_queue, spec


def with_dge_mode(trace: Trace, dge_mode: str, queue_engine: str | None = None) -> Trace:
    """A copy of `trace` whose every dma_copy uses `dge_mode` (issued from `queue_engine`)."""
    queue = dma_queue(dge_mode, queue_engine)
    instructions = [ins if ins.dma is None else replace(ins, dma=replace(ins.dma, dge_mode=dge_mode, queue_engine=queue))
                    for ins in trace.instructions]
    return replace(trace, kernel=f"{trace.kernel} [{dge_mode}]", instructions=instructions,
                   sbuf_peak_bytes_per_partition=dict(trace.sbuf_peak_bytes_per_partition),
                   order_edges=list(trace.order_edges))


def alongside(trace: Trace, neighbour: Trace) -> Trace:
    """`trace` and `neighbour` as one launch on the same cores, independent of each other: what a
    kernel meets inside a model graph, where the compiler overlaps it with neighbouring kernels that
    share its engines and DMA queues. The neighbour's instructions follow the kernel's in each
    program and touch only their own storages; its core_barriers are numbered after the kernel's."""
    if trace.lnc != neighbour.lnc:
        raise ValueError(f"alongside: {trace.kernel!r} runs at LNC={trace.lnc}, {neighbour.kernel!r} at "
                         f"LNC={neighbour.lnc}; a neighbour shares the same cores")
    offset = 1 + max((o.region.storage_id for i in trace.instructions for o in (*i.reads, *i.writes)), default=0)
    count = {p: len(trace.program(p)) for p in {i.program_id for i in trace.instructions}}
    barriers = {p: sum(_is_barrier(i) for i in trace.program(p)) for p in count}

    def moved(ops):
        return tuple(replace(o, _region=replace(o.region, storage_id=o.region.storage_id + offset)) for o in ops)

    def attrs(i):
        if not _is_barrier(i):
            return i.attrs
        return {**i.attrs, "barrier": i.attrs["barrier"] + barriers.get(i.program_id, 0)}

    extra = [replace(i, index=i.index + count.get(i.program_id, 0), reads=moved(i.reads), writes=moved(i.writes),
                     name=f"{neighbour.kernel}:{i.name}" if i.name else neighbour.kernel, attrs=attrs(i))
             for i in neighbour.instructions]

    def shifted(edges):
        return [(p, later + count.get(p, 0), earlier + count.get(p, 0)) for p, later, earlier in edges]

    allocations = [replace(a, storage_id=a.storage_id + offset, first=a.first + count.get(a.program_id, 0),
                           last=a.last + count.get(a.program_id, 0)) for a in neighbour.sbuf_allocations]
    return replace(trace, kernel=f"{trace.kernel} + {neighbour.kernel}", instructions=[*trace.instructions, *extra],
                   sbuf_peak_bytes_per_partition=dict(trace.sbuf_peak_bytes_per_partition),
                   order_edges=[*trace.order_edges, *shifted(neighbour.order_edges)],
                   issue_edges=(*trace.issue_edges, *shifted(neighbour.issue_edges)),
                   sbuf_allocations=[*trace.sbuf_allocations, *allocations],
                   psum_banks=(*trace.psum_banks, *((sid + offset, bank) for sid, bank in neighbour.psum_banks)))


def _is_barrier(ins: Instruction) -> bool:
    return spec(ins.isa).collective == BARRIER
