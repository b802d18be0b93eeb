"""What-if rewrites of a recorded trace, for questions the kernel source does not parameterise
(e.g. "this kernel with software DGE instead of dge_mode.none"). The result is still only an input
to the cost model: it was never run."""
from __future__ import annotations

from dataclasses import replace

from nkisim.emulator.trace import Trace

DEFAULT_QUEUE = {"unknown": "GpSimd", "swdge": "GpSimd", "hwdge": "Sync", "none": "none"}


def with_dge_mode(trace: Trace, dge_mode: str, queue_engine: str | None = None) -> Trace:
    """A copy of `trace` whose every dma_copy uses `dge_mode` (issued from `queue_engine`)."""
    if dge_mode not in DEFAULT_QUEUE:
        raise ValueError(f"unknown dge_mode {dge_mode!r}; expected one of {sorted(DEFAULT_QUEUE)}")
    queue = queue_engine or DEFAULT_QUEUE[dge_mode]
    if dge_mode == "hwdge" and queue not in ("Sync", "Scalar"):
        raise ValueError(f"hwdge DMAs are issued from the Sync or Scalar queue, not {queue!r}")
    instructions = [ins if ins.dma is None else replace(ins, dma=replace(ins.dma, dge_mode=dge_mode, queue_engine=queue))
                    for ins in trace.instructions]
    return replace(trace, kernel=f"{trace.kernel} [{dge_mode}]", instructions=instructions,
                   sbuf_peak_bytes_per_partition=dict(trace.sbuf_peak_bytes_per_partition))
