"""Vector and Scalar share PSUM at full bandwidth only on different banks.

SDK:nki/guides/architecture/trainium2_arch.rst (memory hierarchy): on NeuronCore-v3 "Both VectorE and ScalarE
can access PSUM at full bandwidth in parallel, as long as their accesses do not collide on the same PSUM bank"
(on NeuronCore-v2 they could not access PSUM in parallel at all). The model runs two such instructions on one
bank one after the other, in program order; on different banks, side by side."""
from __future__ import annotations

import pytest
import torch

import nkisim
from nkisim.profile.summary import estimate

import nki
import nki.isa as nisa
import nki.language as nl

BANK = 2048   # bytes per partition of one PSUM bank


def _reads(vector_view, scalar_view):
    """A Vector reduce of one PSUM view, then a Scalar exp of another: neither reads what the other writes."""
    total = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=total, op=nl.add, data=vector_view, axis=1)
    e = nl.ndarray(scalar_view.shape, dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=e, op=nl.exp, data=scalar_view)
    out = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out, src=total)
    return out


def _products(x, *tiles):
    """Each PSUM tile (512 fp32 or fewer per partition: one matmul) filled by a matmul of x with itself."""
    a = nl.ndarray((128, 512), dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    for t in tiles:
        nisa.nc_matmul(dst=t, stationary=a[:, 0:128], moving=a[:, 0:t.shape[1]])


@nki.jit
def one_tile(x):
    p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
    _products(x, p)
    return _reads(p, p)


@nki.jit
def two_tiles(x):
    p, q = (nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(2))
    _products(x, p, q)
    return _reads(p, q)


def _placed(first_bank: int, second_bank: int):
    @nki.jit
    def kernel(x):
        p = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, first_bank * BANK))
        q = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, second_bank * BANK))
        _products(x, p, q)
        return _reads(p, q)
    return kernel


def _halves(scalar_from: int):
    """One two-bank tile: Vector reads the first bank's 512 columns, Scalar from column `scalar_from` on."""
    @nki.jit
    def kernel(x):
        wide = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
        _products(x, wide[:, 0:512], wide[:, 512:1024])
        return _reads(wide[:, 0:512], wide[:, scalar_from:1024])
    return kernel


@nki.jit
def reinterpreted_half(x):
    """Scalar reads the tile's second bank through a bf16 view: 512 fp32 columns in, so 2 KiB in, whatever the
    view's element size."""
    wide = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum)
    _products(x, wide[:, 0:512], wide[:, 512:1024])
    return _reads(wide[:, 0:512], wide[:, 512:1024].view(nl.bfloat16))


def _vector_then_scalar(kernel):
    trace = nkisim.run(kernel, torch.empty(128, 512, dtype=torch.bfloat16), dry_run=True).trace
    slots = estimate(trace, with_range=False).timeline.slots
    (reduce,) = [s for s in slots if s.opcode == "TENSOR_REDUCE"]
    (exp,) = [s for s in slots if s.opcode == "ACTIVATE"]
    return reduce, exp


@pytest.mark.parametrize("kernel, shared", [
    (one_tile, True), (two_tiles, False),            # the compiler gives each tile a bank of its own
    (_placed(3, 3), True), (_placed(3, 5), False),   # tiles placed by hand share a bank only at one address
    (_halves(512), False), (_halves(448), True),     # a two-bank tile: only the overlapping bank collides
    (reinterpreted_half, False),                     # a bank is bytes of the tile, not elements of the view
], ids=["one tile", "two tiles", "placed on one bank", "placed on two banks", "bank halves", "overlapping halves",
        "reinterpreted second bank"])
def test_vector_and_scalar_take_turns_on_a_shared_psum_bank(kernel, shared):
    reduce, exp = _vector_then_scalar(kernel)
    if shared:
        assert exp.start == pytest.approx(reduce.end, abs=1e-12)   # right after the reduce: no semaphore
    else:
        assert exp.start < reduce.end                      # side by side
