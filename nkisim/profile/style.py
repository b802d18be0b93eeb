"""What every profile view shares: figure width and how each source (estimate, measurement,
publication) is drawn and named, so no figure mixes them up."""
from __future__ import annotations

from nkisim.profile.summary import ProfileSummary

WIDTH_IN = 9.5     # notebook width
SOURCE_STYLE = {"estimate": dict(facecolor="#3a73b5"), "measured": dict(facecolor="#4c9a5b"),
                "published": dict(facecolor="#e8852f", hatch="//")}
SOURCE_KEY = {"estimate": "blue", "measured": "green", "published": "orange, hatched"}


def source_kind(source: str) -> str:
    """"estimate", "published" or "measured", from a summary's source label."""
    return "estimate" if "estimate" in source else "published" if "published" in source else "measured"


def sources_key(summaries: dict[str, ProfileSummary]) -> str:
    """The one source of all summaries, or a colour key line per source."""
    sources = dict.fromkeys(s.source for s in summaries.values())
    if len(sources) == 1:
        return next(iter(sources))
    return "\n".join(f"{SOURCE_KEY[source_kind(src)]}: {src}" for src in sources)
