"""A tiny harness: load arrays into SBUF tiles, run a body of ISA calls, return chosen tiles."""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np


def run_tiles(body, *arrays, outs=()):
    """body(*input_tiles, *output_tiles) runs inside a kernel; returns the output tiles as arrays.

    `outs` is a sequence of (shape, dtype) for fresh (NaN-filled) SBUF output tiles."""
    outs = tuple(outs)

    @nki.jit
    def harness(*xs):
        tiles = []
        for x in xs:
            t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            tiles.append(t)
        out_tiles = [nl.ndarray(shape, dtype=dt, buffer=nl.sbuf) for shape, dt in outs]
        body(*tiles, *out_tiles)
        results = []
        for o in out_tiles:
            h = nl.ndarray(o.shape, dtype=o.dtype, buffer=nl.shared_hbm)
            nisa.dma_copy(dst=h, src=o)
            results.append(h)
        return tuple(results)

    res = harness(*arrays)
    return res[0] if len(res) == 1 else res


def inside_a_kernel(body, *arrays):
    """What body(*tensors) returns when it runs inside a one-program launch on `arrays`."""
    got = []

    def kernel(*xs):
        got.append(body(*xs))
    nki.jit(kernel)(*arrays)
    return got[0]


def copy_through_sbuf(x):
    """A kernel body: out = x, staged through one SBUF tile."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


def rand(shape, seed=0, lo=-3.0, hi=3.0):
    return np.random.default_rng(seed).uniform(lo, hi, size=shape).astype(np.float32)


def compiled_loop(kind, trips, body):
    """Run `body(i)` `trips` times in a compiled loop of `kind` (i: the index, or None for while_loop)."""
    if kind == "fori_loop":
        nl.fori_loop(0, trips, body)
        return
    if kind == "dynamic_range":     # NKI 0.6
        for i in nl.dynamic_range(trips):
            body(i)
        return
    count = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=count, value=trips)

    def step(r):
        body(None)
        nisa.tensor_scalar(dst=count, data=count, op0=nl.subtract, operand0=1)
        nxt = nisa.register_alloc(0)
        nisa.register_load(nxt, count)
        return nxt

    start = nisa.register_alloc(0)
    nisa.register_load(start, count)
    nl.while_loop(start, step)
