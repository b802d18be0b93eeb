"""What-if rewrites of a recorded trace, for questions the kernel source does not parameterise
(e.g. "this kernel with software DGE instead of dge_mode.none"). The result is still only an input
to the cost model: it was never run."""
from __future__ import annotations

from dataclasses import replace

from nkisim.emulator.trace import Trace
from nkisim.vocabulary import dma_queue


def with_dge_mode(trace: Trace, dge_mode: str, queue_engine: str | None = None) -> Trace:
    """A copy of `trace` whose every dma_copy uses `dge_mode` (issued from `queue_engine`)."""
    queue = dma_queue(dge_mode, queue_engine)
    instructions = [ins if ins.dma is None else replace(ins, dma=replace(ins.dma, dge_mode=dge_mode, queue_engine=queue))
                    for ins in trace.instructions]
    return replace(trace, kernel=f"{trace.kernel} [{dge_mode}]", instructions=instructions,
                   sbuf_peak_bytes_per_partition=dict(trace.sbuf_peak_bytes_per_partition))
