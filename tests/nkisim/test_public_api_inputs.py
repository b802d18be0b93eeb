"""nkisim's public functions (CONTRIBUTING.md, "Public API") on awkward input: an error that names the
function, the argument, what it got and what it accepts, or the documented result where the input is
legal (issue 27, part 3)."""
from __future__ import annotations

import numpy as np
import pytest

import nkisim

nkisim.install()

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402

X = np.arange(256 * 4, dtype=np.float32).reshape(256, 4)


@nki.jit
def halves_copy(x):
    """Each program copies its half of the rows (128 per program at LNC=2, all 256 at LNC=1)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    share = x.shape[0] // nl.num_programs(axes=0)
    for r0 in range(nl.program_id(0) * share, (nl.program_id(0) + 1) * share, 128):
        tile = nl.ndarray((128, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[r0:r0 + 128, :])
        nisa.dma_copy(dst=out[r0:r0 + 128, :], src=tile)
    return out


class Opaque:
    """An object with no Python function inside."""


def _summary() -> nkisim.ProfileSummary:
    return nkisim.estimate(nkisim.run(halves_copy, X, dry_run=True).trace)


# --- nkisim.run, nkisim.profile, nkisim.profile_model --------------------------------------------------
LAUNCHERS = {"nkisim.run": nkisim.run, "nkisim.profile": nkisim.profile, "nkisim.profile_model": nkisim.profile_model}


@pytest.mark.parametrize("function", LAUNCHERS)
@pytest.mark.parametrize("kernel, error, match", [
    (None, TypeError, r"kernel must be an nki.jit kernel, a launch kernel\[n\] or a Python function, got None"),
    (42, TypeError, r"kernel must be .* got int 42"),
    (Opaque(), TypeError, r"kernel must be .* got a test_public_api_inputs.Opaque object \(no Python function"),
], ids=["None", "int", "no-function-inside"])
def test_launchers_name_a_bad_kernel(function: str, kernel, error, match: str) -> None:
    with pytest.raises(error, match=f"{function}: {match}"):
        LAUNCHERS[function](kernel, X)


@pytest.mark.parametrize("function", LAUNCHERS)
@pytest.mark.parametrize("kwargs, error, match", [
    ({"lnc": 3}, ValueError, r"lnc=3; trn2 supports LNC 1 or 2"),
    ({"lnc": "2"}, TypeError, r"lnc must be 1 or 2 .*, got str '2'"),
    ({"lnc": True}, TypeError, r"lnc must be 1 or 2 .*, got bool"),
], ids=["lnc3", "lnc-str", "lnc-bool"])
def test_launchers_name_a_bad_lnc(function: str, kwargs: dict, error, match: str) -> None:
    with pytest.raises(error, match=f"{function}: {match}"):
        LAUNCHERS[function](halves_copy, X, **kwargs)


@pytest.mark.parametrize("function", LAUNCHERS)
def test_a_launch_runs_at_its_own_lnc(function: str) -> None:
    """kernel[2] given to run/profile is an LNC=2 launch, as `kernel[2](x)` is (it used to drop the [2])."""
    result = LAUNCHERS[function](halves_copy[2], X)
    lnc = result.trace.lnc if function == "nkisim.run" else result.lnc
    assert lnc == 2
    if function == "nkisim.run":
        np.testing.assert_array_equal(result.outputs, X)
        assert LAUNCHERS[function](halves_copy[2], X, lnc=2).trace.lnc == 2   # agreeing lnc= is fine


@pytest.mark.parametrize("function", LAUNCHERS)
def test_a_launch_and_a_contradicting_lnc_are_refused(function: str) -> None:
    with pytest.raises(ValueError, match=rf"{function}: kernel is a launch at LNC=2 \(kernel\[2\]\) but lnc=1"):
        LAUNCHERS[function](halves_copy[2], X, lnc=1)


@nki.jit
def scaled_copy(x, lnc=1, dry_run=False):
    """A kernel with parameters named like the launchers' own options (nki-library kernels take an `lnc`)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    nisa.tensor_scalar(dst=tile, data=tile, op0=nl.multiply, operand0=float(lnc) + float(dry_run))
    nisa.dma_copy(dst=out, src=tile)
    return out


@pytest.mark.parametrize("function", LAUNCHERS)
def test_an_option_that_a_kernel_parameter_shadows_is_refused(function: str) -> None:
    """lnc= sets the launch up; were it taken silently, the kernel would run with its own default lnc=1."""
    with pytest.raises(nkisim.NkiArgumentError, match=rf"{function}: kernel 'scaled_copy' has a parameter 'lnc' of "
                       r"its own, but .*lnc=2 sets up the launch .* pass the kernel's lnc positionally \(argument 2"):
        LAUNCHERS[function](scaled_copy, X[:128], lnc=2)
    assert isinstance(LAUNCHERS[function](scaled_copy, X[:128]), (nkisim.Run, nkisim.ProfileSummary))  # not given: fine


def test_the_positional_spelling_reaches_the_kernel() -> None:
    np.testing.assert_array_equal(nkisim.run(scaled_copy, X[:128], 2).outputs, 2 * X[:128])
    with pytest.raises(nkisim.NkiArgumentError, match=r"has a parameter 'dry_run' of its own") as err:
        nkisim.run(scaled_copy, X[:128], dry_run=True)
    assert str(err.value).endswith("pass the kernel's dry_run positionally (argument 3 of scaled_copy)")


def test_run_names_a_non_bool_dry_run() -> None:
    with pytest.raises(TypeError, match=r"nkisim.run: dry_run must be True or False, got str 'yes'"):
        nkisim.run(halves_copy, X, dry_run="yes")


# --- nkisim.estimate ------------------------------------------------------------------------------------
@pytest.mark.parametrize("args, error, match", [
    (lambda run: (None,), TypeError, r"trace must be a nkisim Trace \(run.trace, nkisim.last_trace\(\)\), got None"),
    (lambda run: ([],), TypeError, r"trace must be a nkisim Trace .*, got list"),
    (lambda run: (run,), TypeError, r"trace must be a nkisim Trace .*, got Run; for a Run pass run.trace and "
                                    r"run.sbuf_peak_bytes"),
    (lambda run: (run.trace, -1), ValueError, r"sbuf_peak_bytes=-1 must be an int >= 0"),
    (lambda run: (run.trace, 1.5), TypeError, r"sbuf_peak_bytes must be an int >= 0, got float 1.5"),
    (lambda run: (run.trace, None, "no"), TypeError, r"with_range must be True or False, got str 'no'"),
], ids=["None", "list", "Run", "negative-peak", "float-peak", "with_range-str"])
def test_estimate_names_its_bad_argument(args, error, match: str) -> None:
    with pytest.raises(error, match=f"nkisim.estimate: {match}"):
        nkisim.estimate(*args(nkisim.run(halves_copy, X, dry_run=True)))


# --- nkisim.show_kernel_diff -----------------------------------------------------------------------------
@pytest.mark.parametrize("args, kwargs, error, match", [
    ((halves_copy, 42), {}, TypeError, r"after must be a kernel, a function, a module or a source string, got int 42"),
    ((None, halves_copy), {}, TypeError, r"before must be a kernel, .* got None"),
    ((halves_copy, Opaque()), {}, TypeError, r"after must be an nki.jit kernel, .* got a test_public_api_inputs.Opaque"),
    (("a", "b"), {"context": -1}, ValueError, r"context=-1 must be an int >= 0"),
    (("a", "b"), {"context": "3"}, TypeError, r"context must be an int >= 0, got str '3'"),
    (("a", "b"), {"before_label": 1}, TypeError, r"before_label must be a string or None, got int 1"),
], ids=["after-int", "before-None", "after-no-function", "context-negative", "context-str", "label-int"])
def test_show_kernel_diff_names_its_bad_argument(args, kwargs, error, match: str) -> None:
    with pytest.raises(error, match=f"show_kernel_diff: {match}"):
        nkisim.show_kernel_diff(*args, **kwargs)


# --- the profile views -----------------------------------------------------------------------------------
@pytest.mark.parametrize("view, value, error, match", [
    ("show_timeline", lambda: None, TypeError, r"summary must be a ProfileSummary .*, got None"),
    ("show_timeline", lambda: nkisim.run(halves_copy, X, dry_run=True), TypeError,
     r"summary must be a ProfileSummary .*, got Run"),
    ("show_comparison", lambda: [], TypeError, r"summaries must be a non-empty dict \{label: ProfileSummary\}, "
                                               r"got list"),
    ("show_comparison", lambda: {}, ValueError, r"summaries is empty; it needs at least one \{label: ProfileSummary\}"),
    ("show_comparison", lambda: {"v1": None}, TypeError, r"summaries\['v1'\] must be ProfileSummary, got None"),
    ("show_roofline", lambda: None, TypeError, r"summaries must be a non-empty dict"),
    ("show_roofline", lambda: {1: _summary()}, TypeError, r"summaries label 1 must be a string, got int 1"),
], ids=["timeline-None", "timeline-Run", "comparison-list", "comparison-empty", "comparison-None-value",
        "roofline-None", "roofline-int-label"])
def test_views_name_their_bad_argument(view: str, value, error, match: str) -> None:
    with pytest.raises(error, match=f"{view}: {match}"):
        getattr(nkisim, view)(value())


# --- install ---------------------------------------------------------------------------------------------
def test_verbose_must_be_a_bool() -> None:
    with pytest.raises(TypeError, match=r"nkisim.install: verbose must be True or False, got str 'yes'"):
        nkisim.install(verbose="yes")
