"""Random numbers: `rng`, `dropout`, `set_rng_seed`, `rand_set_state`, `rand_get_state`.

Sources (NKI 0.6 API reference):
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.rng.html
(and .dropout / .set_rng_seed / .rand_set_state / .rand_get_state pages).

The pages name the generator (XORWOW: "src_seeds element count for XORWOW must be 6 elements
(GpSimd)") but not how lanes walk through it or how `set_rng_seed` expands one 32-bit seed, so the
emulator's random BITS are not the hardware's; their distribution and every documented rule are.
The emulator's generator, per program and engine: one XORWOW state (x, y, z, w, v, d) per lane
(partition), Marsaglia's update, the free elements of a partition drawn in row-major order.
`set_rng_seed(s)` seeds the Vector generator's lane p with SplitMix32 outputs of s + p; the
GpSimd generator's state is what `rand_set_state` wrote, and before any seeding both start as if
seeded with 0. `rng` keeps the least significant bits of each 32-bit draw; `dropout` drops an
element when its draw / 2^32 < prob (prob 1.0 drops all, 0.0 none) and keeps the others unscaled.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import dtypes
from ..costmodel import costs
from ..limits import PARTITIONS
from ..vocabulary import GPSIMD, VECTOR, instruction
from .enums import engine
from .issue import Issue, NkiInstruction, rows_f32
from .tensor import PSUM, SBUF, NkiTensor

_Engine = engine
XORWOW_WORDS = 6                # x, y, z, w, v, d (rand_set_state page: 6 elements on GpSimd)
_WEYL = np.uint32(362437)
_RNG_DTYPES = (dtypes.int8, dtypes.int16, dtypes.int32, dtypes.uint8, dtypes.uint16, dtypes.uint32)


def _splitmix32(x: np.ndarray) -> np.ndarray:
    z = (x + np.uint32(0x9E3779B9)).astype(np.uint32)
    z = ((z ^ (z >> np.uint32(16))) * np.uint32(0x85EBCA6B)).astype(np.uint32)
    z = ((z ^ (z >> np.uint32(13))) * np.uint32(0xC2B2AE35)).astype(np.uint32)
    return z ^ (z >> np.uint32(16))


def _seeded(seed: int) -> np.ndarray:
    """[PARTITIONS, 6] XORWOW states from one 32-bit seed (the emulator's expansion)."""
    state = np.empty((PARTITIONS, XORWOW_WORDS), np.uint32)
    x = (np.arange(PARTITIONS, dtype=np.uint64) + np.uint64(seed & 0xFFFFFFFF)).astype(np.uint32)
    for k in range(XORWOW_WORDS):
        x = _splitmix32(x)
        state[:, k] = x
    return state


def _states(c: Issue) -> dict[str, np.ndarray]:
    prog = c.prog
    if prog.rng_states is None:
        prog.rng_states = {VECTOR: _seeded(0), GPSIMD: _seeded(0)}
    return prog.rng_states


def _draw(state: np.ndarray, partitions: int, count: int) -> np.ndarray:
    """[partitions, count] uint32 draws; advances lanes 0..partitions-1 of `state` in place."""
    x, y, z, w, v, d = (state[:partitions, k].copy() for k in range(XORWOW_WORDS))
    out = np.empty((partitions, count), np.uint32)
    with np.errstate(over="ignore"):
        for i in range(count):
            t = x ^ (x >> np.uint32(2))
            x, y, z, w = y, z, w, v
            v = (v ^ (v << np.uint32(4))) ^ (t ^ (t << np.uint32(1)))
            d = d + _WEYL
            out[:, i] = v + d
    for k, word in enumerate((x, y, z, w, v, d)):
        state[:partitions, k] = word
    return out


@instruction("RNG", engines=(VECTOR, GPSIMD), cost=costs.per_element_cycles, color="#a61c00")
def rng(dst: NkiTensor, engine: Any = engine.vector, name: str | None = None) -> NkiInstruction:
    """dst = 32 random bits per element, truncated to dst's integer width (Vector or GpSimd)."""
    c = Issue("rng", name)
    dst = c.tensor("dst", dst)
    lane = c.lane(engine)
    if dst.dtype not in _RNG_DTYPES:
        c.fail(f"dst dtype {dst.dtype.name} must be an integer type (int8, int16, int32, uint8, uint16 or uint32)")
    if lane == GPSIMD and dst.buffer is PSUM:
        c.fail("dst is in psum; with engine=gpsimd it must be in SBUF (GpSimd cannot access PSUM)")
    ins = c.record(lane, [], [("dst", dst)], {"dtype": dst.dtype.name})
    if c.prog.compute:
        bits = _draw(_states(c)[lane], dst.shape[0], dst.elements_per_partition)
        dst.arr[...] = bits.astype(dst.dtype).reshape(dst.shape)     # integer casts keep the low bits
    return ins


@instruction("DROPOUT", engines=(VECTOR,), cost=costs.per_element_cycles, color="#cc4125")
def dropout(dst: NkiTensor, data: NkiTensor, prob: Any, name: str | None = None) -> NkiInstruction:
    """dst = data with each element replaced by 0 with probability prob (a number or a [P, 1] tile)."""
    c = Issue("dropout", name)
    dst, data = c.tensor("dst", dst), c.tensor("data", data)
    c.same_layout("dst", dst, ("data", data))
    if dst.dtype != data.dtype:
        c.fail(f"dst dtype {dst.dtype.name} must match data dtype {data.dtype.name}")
    reads = [("data", data)]
    if isinstance(prob, NkiTensor):
        reads.append(("prob", c.column("prob", prob, data.shape[0], fp32=False)))
        if not dtypes.is_float(prob.dtype):
            c.fail(f"prob dtype {prob.dtype.name} must be a float type")
        if not dtypes.is_float(data.dtype) and prob.dtype != dtypes.float32:
            c.fail(f"data is {data.dtype.name} (an integer type), so prob must be float32, got {prob.dtype.name}")
    else:
        c.number("prob", prob)
        if not 0.0 <= float(prob) <= 1.0:
            c.fail(f"prob={prob!r} must be a probability in [0, 1]")
    ins = c.record(VECTOR, reads, [("dst", dst)], {"dtype": dst.dtype.name})
    if c.prog.compute:
        u = _draw(_states(c)[VECTOR], data.shape[0], data.elements_per_partition) / float(1 << 32)
        p = rows_f32(prob).numpy().astype(np.float64) if isinstance(prob, NkiTensor) else float(prob)
        keep = (u >= p).reshape(dst.shape)
        zero = np.zeros((), dst.dtype)
        dst.arr[...] = np.where(keep, data.arr, zero)
    return ins


@instruction("SET_RNG_SEED", engines=(VECTOR,), cost=costs.per_element_cycles, color="#dd7e6b")
def set_rng_seed(src_seeds: NkiTensor, name: str | None = None) -> NkiInstruction:
    """Seed the Vector engine's generator from one 32-bit value ([1, 1] tile in SBUF or PSUM)."""
    c = Issue("set_rng_seed", name)
    src = c.tensor("src_seeds", src_seeds)
    if src.shape[0] != 1 or src.elements_per_partition != 1:
        c.fail(f"src_seeds must be a [1, 1] tensor, got {src.shape}")
    if src.dtype.itemsize != 4:
        c.fail(f"src_seeds must hold a 32-bit value, got {src.dtype.name}")
    ins = c.record(VECTOR, [("src_seeds", src)], [], {"dtype": src.dtype.name}, epp=1)
    if c.prog.compute:
        _states(c)[VECTOR] = _seeded(int(src.arr.reshape(-1)[:1].view(np.uint32)[0]))
    return ins


def _gpsimd_only(c: Issue, engine: Any) -> None:
    c.enum("engine", engine, _Engine)
    if engine is _Engine.vector:
        c.fail("engine=nisa.engine.vector needs NeuronCore-v4 (trn3); on trn2 the generator state lives on GpSimd")
    if engine not in (_Engine.gpsimd, _Engine.unknown):
        c.fail(f"engine={engine!r} is not supported; use nisa.engine.gpsimd")


def _state_tile(c: Issue, role: str, t: Any) -> NkiTensor:
    t = c.tensor(role, t)
    if t.buffer is not SBUF:
        c.fail(f"{role} is in {t.buffer.name}; on trn2 it must be in SBUF")
    if t.dtype != dtypes.uint32:
        c.fail(f"{role} dtype {t.dtype.name} must be uint32")
    if t.elements_per_partition != XORWOW_WORDS:
        c.fail(f"{role} must have {XORWOW_WORDS} elements per partition (the XORWOW state on GpSimd), got "
               f"{t.elements_per_partition}")
    return t


@instruction("RAND_SET_STATE", engines=(GPSIMD,), cost=costs.per_element_cycles, color="#e6b8af")
def rand_set_state(src_seeds: NkiTensor, engine: Any = engine.gpsimd, name: str | None = None) -> NkiInstruction:
    """Set the GpSimd generator's state of lane p from partition p of src_seeds (6 uint32 each)."""
    c = Issue("rand_set_state", name)
    _gpsimd_only(c, engine)
    src = _state_tile(c, "src_seeds", src_seeds)
    ins = c.record(GPSIMD, [("src_seeds", src)], [], {"dtype": "uint32"})
    if c.prog.compute:
        _states(c)[GPSIMD][:src.shape[0]] = src.arr.reshape(src.shape[0], XORWOW_WORDS)
    return ins


@instruction("RAND_GET_STATE", engines=(GPSIMD,), cost=costs.per_element_cycles, color="#f4cccc")
def rand_get_state(dst: NkiTensor, engine: Any = engine.gpsimd, name: str | None = None) -> NkiInstruction:
    """dst partition p = the GpSimd generator's state of lane p (6 uint32)."""
    c = Issue("rand_get_state", name)
    _gpsimd_only(c, engine)
    dst = _state_tile(c, "dst", dst)
    ins = c.record(GPSIMD, [], [("dst", dst)], {"dtype": "uint32"})
    if c.prog.compute:
        dst.arr[...] = _states(c)[GPSIMD][:dst.shape[0]].reshape(dst.shape)
    return ins


__all__ = ["rng", "dropout", "set_rng_seed", "rand_set_state", "rand_get_state"]
