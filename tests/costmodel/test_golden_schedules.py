"""The scheduler places every trace of the golden corpus exactly as the recorded scheduler did
(`schedule_corpus.py`: the traces, task durations and placement constants are frozen in the
fixture, so only the scheduler is compared): every slot, in order, and the critical path."""
from functools import lru_cache

import pytest
from schedule_corpus import PLACEMENT_CONSTANTS, decode_trace, load, slot_rows

from nkisim.costmodel import constants as K
from nkisim.costmodel.scheduler import TensorTerms, _build_tasks, _schedule_tasks


@lru_cache(maxsize=1)
def _fixture():
    return load()


def _names():
    return [e["name"] for e in _fixture()["entries"]]


def test_the_fixture_is_compact_and_says_where_it_came_from():
    data = _fixture()
    assert len(data["commit"]) == 40 and data["generated_by"].endswith("schedule_corpus.py")
    assert len(data["entries"]) >= 60
    assert sum(len(e["slots"]) for e in data["entries"]) > 8000


@pytest.mark.parametrize("name", _names())
def test_schedule_matches_the_golden_fixture(name, monkeypatch):
    data = _fixture()
    entry = next(e for e in data["entries"] if e["name"] == name)
    trace = decode_trace(entry["trace"], data["fields"])
    tasks = _build_tasks(trace)
    assert [t.deps for t in tasks] == entry["deps"]
    assert [t.issue_after for t in tasks] == entry["issue_after"]
    assert [list(t.turn_after) for t in tasks] == entry["turn_after"]   # engines taking turns on shared hardware
    assert len(entry["durations"]) == len(tasks)
    for constant in PLACEMENT_CONSTANTS:
        monkeypatch.setattr(K, constant, data["constants"][constant])
    rows, path = slot_rows(_schedule_tasks(trace, tasks, entry["durations"], tensor=TensorTerms(**entry["tensor"]),
                                           stream=entry["stream"]))
    expected = [list(r) for r in entry["slots"]]
    for n, (got, want) in enumerate(zip(rows, expected, strict=True)):
        assert got == want, f"slot {n}: {got} != recorded {want}"
    assert path == entry["critical_path"]
