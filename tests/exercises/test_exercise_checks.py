"""The checkers accept each exercise's own solution and reject known-wrong answers with a
message about the actual mistake; the exercise stubs stop with NotImplementedError."""
from __future__ import annotations

import re

import pytest

import exercise_loader as support
from exercise_mutants import MUTANTS

NUMBERS = [p.stem[:2] for p in support.gen.sources()]
HELPER_NOTES = support.ROOT / "book" / "instructor" / "helper_notes.md"


def test_every_exercise_has_two_wrong_answers():
    assert NUMBERS, "no exercise sources found"
    thin = {n: len(MUTANTS.get(n, [])) for n in NUMBERS if len(MUTANTS.get(n, [])) < 2}
    assert not thin, f"exercises with fewer than two known-wrong answers: {thin}"


@pytest.mark.parametrize("number", NUMBERS)
def test_checker_accepts_the_solution(number, capsys):
    support.run_check(number, support.load(number))
    assert "checks passed" in capsys.readouterr().out


@pytest.mark.parametrize(
    "number, mutant",
    [(n, m) for n in NUMBERS for m in MUTANTS.get(n, [])],
    ids=lambda v: v.label if isinstance(v, support.Mutant) else v,
)
def test_checker_rejects_wrong_answer(number, mutant):
    namespace = support.load(number, mutant)
    with pytest.raises(AssertionError) as err:
        support.run_check(number, namespace)
    message = str(err.value)
    assert re.search(mutant.expect, message, re.IGNORECASE | re.DOTALL), (
        f"checker message for {mutant.label!r} does not match /{mutant.expect}/:\n{message}")
    # The page shows the whole message; its first line (the checker's own verdict) must match, so a
    # reworded emulator error deeper in the message does not fail this test (regenerate the page then).
    first_line = message.strip().splitlines()[0]
    assert f"```text\n{first_line}\n" in HELPER_NOTES.read_text(), (
        f"{HELPER_NOTES.relative_to(support.ROOT)} does not show this message: run python tools/make_helper_notes.py")
