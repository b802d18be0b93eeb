"""Rules the NKI documentation pages state outside the API reference (migration guide, scheduling
how-to, dynamic loops deep dive), each checked with a kernel written here."""
import re

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from nkisim import NkiValidationError
from nkisim.emulator import nki_versions

from helpers import copy_through_sbuf


def test_jit_platform_target_is_rejected_and_mode_is_ignored():
    # migration guide, NKI 0.3.0: platform_target raises an error; mode= is deprecated and ignored
    with pytest.raises(NkiValidationError, match="platform_target='trn2' is not accepted since NKI 0.3.0.*"
                                                 "NEURON_PLATFORM_TARGET_OVERRIDE"):
        nki.jit(platform_target="trn2")(copy_through_sbuf)
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(nki.jit(mode="torchxla")(copy_through_sbuf)(x), x)


@nki.jit
def _two_named_steps(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.tensor_scalar(dst=u, data=t, op0=nl.multiply, operand0=3.0, name="triple")
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0, name="inc")
    nisa.tensor_tensor(dst=t, data1=t, data2=u, op=nl.add)
    nisa.dma_copy(dst=out, src=t)
    return out


def test_with_schedule_keeps_results_and_checks_the_names():
    # scheduling how-to: edges (later, earlier) where earlier is a name or a list of names
    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    for edges in ([("inc", "triple")], [("inc", ["triple"])], (("triple", ("inc",)),)):
        np.testing.assert_array_equal(_two_named_steps.with_schedule(edges)(x), 4 * x + 1)
    chained = _two_named_steps.with_schedule([("inc", "triple")]).with_schedule([("triple", "inc")])
    assert chained.schedule == (("inc", ("triple",)), ("triple", ("inc",)))
    with pytest.raises(NkiValidationError, match=r"edge \('inc', \['tripel'\]\) names 'tripel', which no instruction"):
        _two_named_steps.with_schedule([("inc", "tripel")])(x)
    with pytest.raises(NkiValidationError, match=r"with_schedule: edge \('inc',\) is not a list of pairs"):
        _two_named_steps.with_schedule([("inc",)])
    with pytest.raises(NkiValidationError, match="edges must be a list of pairs"):
        _two_named_steps.with_schedule("inc")


def _counted_add(x, loop, in_block):
    """out = x + 2 by two register-loop iterations, the loop inside or outside a no_reorder block."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)

    def add_one(_):
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0)

    def run_loop():
        if loop == "dynamic_range":
            for i in nl.dynamic_range(nisa.register_alloc(2)):
                add_one(i)
        elif loop == "fori_loop":
            nl.fori_loop(0, 2, add_one)
        else:
            count = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
            nisa.memset(dst=count, value=2)
            reg = nisa.register_alloc(1)
            while reg:
                add_one(0)
                nisa.tensor_scalar(dst=count, data=count, op0=nl.add, operand0=-1)
                nisa.register_load(reg, count)

    if in_block:
        with nl.no_reorder():
            run_loop()          # the block is dynamically scoped: a called function is inside it too
    else:
        run_loop()
        with nl.no_reorder():
            nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=0.0)
    nisa.dma_copy(dst=out, src=t)
    return out


# nl.dynamic_range and `while reg:` are NKI 0.6's (NKI 0.7 removed them); nl.fori_loop is in both
@pytest.mark.parametrize("loop, version", [("dynamic_range", "0.6"), ("fori_loop", "0.6"), ("fori_loop", "0.7"),
                                           ("while reg:", "0.6")])
def test_dynamic_loops_are_refused_inside_no_reorder(loop, version):
    x = np.zeros((2, 4), np.float32)
    with nki_versions.emulating(version):
        np.testing.assert_array_equal(nki.jit(_counted_add)(x, loop, False), x + 2)
        with pytest.raises(NkiValidationError, match=f"{loop.split()[0]}.*register-based dynamic loop is not "
                                                     r"supported inside an nl.no_reorder\(\) block.*"
                                                     r"test_doc_page_rules.py:\d+"):
            nki.jit(_counted_add)(x, loop, True)


@nki.jit
def _stack_rows_by_assignment(x):
    """x [G, 128, F] in HBM -> out [G, 128, F], staged in one [128, G, F] SBUF buffer by item assignment."""
    G, P, F = x.shape
    out = nl.ndarray((G, P, F), dtype=x.dtype, buffer=nl.shared_hbm)
    staged = nl.ndarray((P, G, F), dtype=x.dtype, buffer=nl.sbuf)
    for g in range(G):
        staged[0:P, g, 0:F] = nl.load(x[g])               # SBUF <- SBUF tile: a tensor_copy
    doubled = nl.ndarray((P, G, F), dtype=x.dtype, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=doubled, data=staged, op0=nl.multiply, operand0=2.0)
    for g in range(G):
        out[g] = doubled[0:P, g, 0:F]                       # HBM <- SBUF: a dma_copy
    return out


def test_item_assignment_copies_a_tile_into_the_view():
    x = np.random.default_rng(3).standard_normal((3, 128, 4)).astype(np.float32)
    r = nkisim.run(_stack_rows_by_assignment, x)
    np.testing.assert_array_equal(r.outputs, 2 * x)
    assert [i.isa for i in r.trace].count("tensor_copy") == 3


def test_item_assignment_of_a_constant_is_refused():
    def fill_by_assignment(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        t[...] = 0.0
        return copy_through_sbuf(x)

    with pytest.raises(NkiValidationError, match=r"item assignment copies a tile.*got float; fill a tile with a "
                                                 r"constant by nisa.memset \(test_doc_page_rules.py:\d+\)"):
        nki.jit(fill_by_assignment)(np.zeros((2, 4), np.float32))


@pytest.mark.parametrize("use, match", [
    (lambda: nl.par_dim(128), r"nki.language.par_dim is not in NKI {}: removed with block dimensions"),
    (lambda: nl.mgrid[0:128, 0:4], r"nki.language.mgrid is not in NKI {}: removed in NKI 0.2.0"),
    (lambda: nl.arange(128), r"nki.language.arange is not in NKI {}: removed in NKI 0.2.0"),
    (lambda: nisa.tensor_copy_dynamic_src, r"tensor_copy_dynamic_src is not in NKI {}: removed in NKI 0.4.0.*"
                                           r"scalar_offset"),
    (lambda: nl.dynamic_range(2), r"nki.language.dynamic_range is not in NKI {}: removed in NKI 0.7: use "
                                  r"nl.fori_loop"),
])
@pytest.mark.parametrize("version", nki_versions.VERSIONS)
def test_removed_names_say_what_replaced_them(use, match, version):
    def uses_a_removed_name(x):
        use()
        return copy_through_sbuf(x)

    if "dynamic_range" in match and version == "0.6":
        return      # NKI 0.6 still has it (deprecated)
    with nki_versions.emulating(version):
        with pytest.raises(NkiValidationError, match=match.format(re.escape(nki_versions.release())) +
                           r".*\(test_doc_page_rules.py:\d+\)"):
            nki.jit(uses_a_removed_name)(np.zeros((2, 4), np.float32))
        assert not hasattr(nl, "par_dim") and not hasattr(nisa, "tensor_copy_dynamic_dst")
