"""trn2 cost model over nkisim's instruction trace: constants (with sources), scheduler, summary,
published figures. Every number it produces is labelled "trn2 cost model (estimate)"."""
from .summary import SOURCE_ESTIMATE, SOURCE_MEASURED, ProfileSummary, estimate

__all__ = ["ProfileSummary", "estimate", "SOURCE_ESTIMATE", "SOURCE_MEASURED"]
