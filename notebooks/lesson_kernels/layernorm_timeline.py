"""Questions the track-2 notebooks ask of a modeled timeline (a cost-model ProfileSummary)."""
from nkisim import ProfileSummary


def _slots(summary: ProfileSummary) -> list:
    """Every placed slot of a modeled timeline (hardware profiles have none)."""
    if summary.timeline is None:
        raise ValueError(f"{summary.kernel}: no timeline (source: {summary.source}); "
                         "timelines come from cost-model estimates")
    return summary.timeline.slots


def named_slots(summary: ProfileSummary, prefix: str) -> list:
    """Timeline slots whose kernel `name=` label starts with `prefix` (e.g. 'load', 'add_b0')."""
    return [s for s in _slots(summary) if s.name and s.name.startswith(prefix)]


def first_start_us(summary: ProfileSummary, prefix: str) -> float:
    """When the first instruction labelled `prefix...` starts, in µs from kernel start."""
    return 1e6 * min(s.start for s in named_slots(summary, prefix))


def last_end_us(summary: ProfileSummary, prefix: str) -> float:
    """When the last instruction labelled `prefix...` ends, in µs from kernel start."""
    return 1e6 * max(s.end for s in named_slots(summary, prefix))


def dma_order(summary: ProfileSummary, core: int = 0) -> str:
    """One core's transfers in the order they start: L for a load, S for a store (by `name=` label)."""
    transfers = sorted((s for s in _slots(summary) if s.engine == "DMA" and s.core == core and s.name),
                       key=lambda s: (s.start, s.index))
    return "".join("L" if s.name.startswith("load") else "S" if s.name.startswith("store") else "." for s in transfers)


def descriptor_blocks(summary: ProfileSummary, lane: str | None = None) -> list:
    """Descriptor-generation slots, on one lane ('GpSimd' for software DGE, 'DGE/Sync' for hwdge) or all."""
    return [s for s in _slots(summary) if s.opcode == "DGE" and lane in (None, s.lane)]


def descriptor_time_us(summary: ProfileSummary) -> float:
    """Engine time spent generating DMA descriptors during the launch, in µs (0 with dge_mode.none)."""
    return 1e6 * sum(s.duration for s in descriptor_blocks(summary))


# The stand-in neighbour of the encoder context: the MLP's GELU over 1024 tokens x 4096 (bf16),
# its DMAs triggered from the Sync queue with hardware DGE, as the published note implies for the
# encoder's neighbouring kernels ("delayed the neighbouring kernels' loads on that queue").
NEIGHBOUR_SHAPE = (1024, 4096)


def beside_neighbour(kernel, *args) -> ProfileSummary:
    """The kernel's modeled profile when launched beside the neighbour on the same core, sharing its
    engines and DMA queues (nkisim.costmodel.variants.alongside): an encoder-like context."""
    import nkisim
    import torch
    from kernels import gelu_fwd
    from nkisim.costmodel.variants import alongside, with_dge_mode

    neighbour = with_dge_mode(nkisim.run(gelu_fwd, torch.empty(NEIGHBOUR_SHAPE, dtype=torch.bfloat16),
                                         dry_run=True).trace, "hwdge")
    own = nkisim.run(kernel, *args, dry_run=True).trace
    return nkisim.estimate(alongside(own, neighbour))


def neighbour_done_us(summary: ProfileSummary) -> float:
    """When the neighbour's last instruction ends, in µs (its labels start with 'gelu_fwd')."""
    return last_end_us(summary, "gelu_fwd")


def kernel_done_us(summary: ProfileSummary) -> float:
    """When the kernel's own last instruction ends, in µs (everything not labelled by the neighbour)."""
    return 1e6 * max(s.end for s in _slots(summary) if not (s.name and s.name.startswith("gelu_fwd")))
