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


def descriptor_blocks(summary: ProfileSummary, lane: str) -> list:
    """Descriptor-generation slots on one lane ('GpSimd' for software DGE, 'Sync' for hwdge)."""
    return [s for s in _slots(summary) if s.opcode == "DGE" and s.lane == lane]
