"""A checker failure reaches the learner as the checker's message, once, without checker frames
(issue 17 item 11): in plain Python (no chained exception) and in IPython/Jupyter (only the
learner's cell)."""
import re
import traceback

import pytest
import torch
from IPython.core.interactiveshell import InteractiveShell

from exercises import checkers, grading


def _tanh_gelu(x: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.gelu(x, approximate="tanh")


def _exact_grad(x: torch.Tensor) -> torch.Tensor:
    return torch.ones_like(x)


def _failure(fn, *args) -> grading.CheckFailed:
    with pytest.raises(grading.CheckFailed) as info:
        fn(*args)
    return info.value


def test_a_failure_is_raised_afresh_without_the_error_it_came_from():
    def crashing(x):
        raise ZeroDivisionError("learner's bug here")

    err = _failure(checkers.check_gelu_reference, crashing, _exact_grad)
    text = "".join(traceback.format_exception(err))
    assert err.__suppress_context__ and err.__cause__ is None
    assert "During handling" not in text and "direct cause" not in text
    assert text.count("learner's bug here") == 1                      # the message, once
    assert "checkers.py" not in text                                    # no checker internals
    assert len(re.findall(r'File "', text)) <= 2                        # this test's frame + the entry point


def test_in_ipython_only_the_learners_cell_and_the_message_are_shown():
    shell = InteractiveShell.instance()
    shown: list[list[str]] = []
    original = shell._showtraceback
    shell._showtraceback = lambda etype, evalue, stb: shown.append(stb)
    try:
        shell.user_ns.update(checkers=checkers, tanh_gelu=_tanh_gelu, exact_grad=_exact_grad)
        shell.run_cell("checkers.check_gelu_reference(tanh_gelu, exact_grad)")
    finally:
        shell._showtraceback = original
    (stb,) = shown
    text = re.sub(r"\x1b\[[0-9;]*m", "", "\n".join(stb))
    assert "CheckFailed" in text and "tanh approximation" in text
    assert text.count("gelu_exact(x) is wrong") == 1
    assert "grading.py" not in text and "checkers.py" not in text
    assert "check_gelu_reference(tanh_gelu, exact_grad)" in text        # the learner's line
