"""Questions the track-2 notebooks ask of a modeled timeline (a ProfileSummary from the cost model)."""
from nkisim import ProfileSummary


def named_slots(summary: ProfileSummary, prefix: str) -> list:
    """Timeline slots whose kernel `name=` label starts with `prefix` (e.g. 'load', 'add_b0')."""
    if summary.timeline is None:
        raise ValueError(f"{summary.kernel}: no timeline (source: {summary.source}); use a cost-model estimate")
    return [s for s in summary.timeline.slots if s.name and s.name.startswith(prefix)]


def first_start_us(summary: ProfileSummary, prefix: str) -> float:
    """When the first instruction labelled `prefix...` starts, in µs from kernel start."""
    return 1e6 * min(s.start for s in named_slots(summary, prefix))


def last_end_us(summary: ProfileSummary, prefix: str) -> float:
    """When the last instruction labelled `prefix...` ends, in µs from kernel start."""
    return 1e6 * max(s.end for s in named_slots(summary, prefix))


def descriptor_blocks(summary: ProfileSummary, lane: str) -> list:
    """Descriptor-generation slots on one engine lane ('GpSimd' for software DGE, 'Sync' for hwdge)."""
    return [s for s in summary.timeline.slots if s.opcode == "DGE" and s.lane == lane]
