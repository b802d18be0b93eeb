"""Search instructions: the top-8 ones `max8`, `nc_find_index8`, `nc_match_replace8` (Vector engine)
and `topk` (GpSimd engine).

Sources (NKI 0.6 API reference):
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.max8.html
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.nc_find_index8.html
https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.nc_match_replace8.html

Values are compared as fp32 (each page: inputs are converted to fp32 internally). Duplicate
values in `vals` are paired with distinct matching positions: in ascending order for
nc_find_index8, in descending slot order for nc_match_replace8 (the nc_match_replace8 page spells
out both rules). A value with no (further) match gets the all-ones index sentinel
(0xFFFFFFFF / 0xFFFF), the rule the nc_find_index8 page gives; nc_match_replace8's page does not
say, so it uses the same sentinel and replaces nothing for that slot. NKI 0.7's max8 page allows a
src of rank 5 and a dst of rank 3 (8 elements per partition), nki_versions row max8-ranks:
https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.max8.html

`topk` follows its v2.33.0 page (TOPK_PAGE): each group of 16 partitions is one problem whose first n
elements are read as a "snake" (element s at partition s % 16, free position s // 16); the k largest
(k = val_dst's free size) and their snake indices are written in the same snake layout, filling the
first ceil(k / 16) free positions. Three things that page leaves open, and nkisim's reading:
  * the order of the k results (sorted=False, the default): not promised. AWS's nki-library says the
    hardware's order is not the ascending one the NKI 0.6 page states (TOPK_LIBRARY: "the topk output
    ORDER is treated as unspecified"), so nkisim writes them in a fixed scrambled order, under both
    versions: a kernel that relies on an order fails here as it can on trn2. sorted=True (NKI 0.7) is
    not emulated: which order it gives is not in the page's visible text.
  * the slots of the last written position past k: "The hardware writes each position across all 16
    partitions at once"; nki-library reads them as garbage, so nkisim writes the uninitialised sentinel.
  * ties: the lower snake index wins; NaN counts as the largest value (an unwritten input shows).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from . import coverage, dtypes, nki_versions
from ..costmodel import costs
from ..vocabulary import GPSIMD, VECTOR, instruction
from .errors import ABSENT, reject_keywords
from .issue import Issue, NkiInstruction, rows_f32
from .tensor import SBUF, NkiTensor

K = 8
SEARCH_MIN, SEARCH_MAX = 8, 16384       # elements per partition searched (max8 / nc_find_index8 pages)
INDEX_DTYPES = (dtypes.uint16, dtypes.uint32)


def _searched(c: Issue, role: str, t: Any, max_ndim: int | None = 3) -> NkiTensor:
    """A searched tile: at most `max_ndim`-D (the NKI 0.6 pages' "up to 3-dimensional"; None where
    issue.FREE_DIMS_PER_API limits the rank instead) with 8 to 16384 elements per partition."""
    t = c.tensor(role, t)
    if max_ndim is not None and t.ndim > max_ndim:
        c.fail(f"{role} is {t.ndim}-D; it can be at most {max_ndim}-D")
    if not SEARCH_MIN <= t.elements_per_partition <= SEARCH_MAX:
        c.fail(f"{role} has {t.elements_per_partition} elements per partition; it must have between {SEARCH_MIN} "
               f"and {SEARCH_MAX}")
    return t


def _eight(c: Issue, role: str, t: Any, partitions: int) -> NkiTensor:
    t = c.tensor(role, t)
    if t.shape[0] != partitions or t.elements_per_partition != K:
        c.fail(f"{role} must be [{partitions}, {K}] ({K} values per partition), got {t.shape}")
    return t


@instruction("MAX8", engines=(VECTOR,), cost=costs.per_element_cycles, color="#b45f06")
def max8(dst: NkiTensor, src: NkiTensor, name: str | None = None) -> NkiInstruction:
    """dst[p] = the 8 largest values of src's partition p, in descending order."""
    c = Issue("max8", name)
    page_ranks = nki_versions.applies("max8-ranks")     # NKI 0.7: src rank <= 5, dst rank <= 3 (FREE_DIMS_PER_API)
    src = _searched(c, "src", src, None if page_ranks else 3)
    dst = _eight(c, "dst", dst, src.shape[0])
    if dst.ndim != 2 and not page_ranks:
        c.fail(f"dst must be 2-D [{src.shape[0]}, {K}], got {dst.shape}")
    ins = c.record(VECTOR, [("src", src)], [("dst", dst)], {"dtype": "float32"})
    if c.prog.compute:
        dtypes.store(dst.arr, torch.topk(rows_f32(src), K, dim=1, largest=True, sorted=True).values)
    return ins


def _index_dst(c: Issue, role: str, t: Any, partitions: int) -> NkiTensor:
    t = _eight(c, role, t, partitions)
    if t.dtype not in INDEX_DTYPES:
        c.fail(f"{role} dtype {t.dtype.name} is not supported; indices are uint16 or uint32")
    return t


def _sentinel(dtype: np.dtype) -> int:
    return int(np.iinfo(dtype).max)


@instruction("FIND_INDEX8", engines=(VECTOR,), cost=costs.per_element_cycles, color="#e69138")
def nc_find_index8(dst: NkiTensor, data: NkiTensor, vals: NkiTensor, name: str | None = None) -> NkiInstruction:
    """dst[p, j] = index of the first occurrence of vals[p, j] in data's partition p (flattened),
    the k-th occurrence for the k-th repeat of a value in vals; all-ones when absent."""
    c = Issue("nc_find_index8", name)
    data = _searched(c, "data", data)
    vals = _eight(c, "vals", vals, data.shape[0])
    dst = _index_dst(c, "dst", dst, data.shape[0])
    ins = c.record(VECTOR, [("data", data), ("vals", vals)], [("dst", dst)], {"dtype": dst.dtype.name})
    if c.prog.compute:
        d, v = rows_f32(data).numpy(), rows_f32(vals).numpy()
        out = np.full((d.shape[0], K), _sentinel(dst.dtype), np.int64)
        for p in range(d.shape[0]):
            for j, pos in _pairs(d[p], v[p], range(K)).items():
                out[p, j] = pos
        dst.arr[...] = out.reshape(dst.shape).astype(dst.dtype)
    return ins


def _pairs(row: np.ndarray, vals: np.ndarray, order: Any) -> dict[int, int]:
    """Slot -> matched position, visiting slots in `order`; each slot takes the first position
    of its value not already taken by an earlier slot."""
    taken: set[int] = set()
    found = {}
    for j in order:
        for pos in np.flatnonzero(row == vals[j]):
            if int(pos) not in taken:
                taken.add(int(pos))
                found[j] = int(pos)
                break
    return found


@instruction("MATCH_REPLACE8", engines=(VECTOR,), cost=costs.per_element_cycles, color="#f6b26b")
def nc_match_replace8(dst: NkiTensor, data: NkiTensor, vals: NkiTensor, imm: float, dst_idx: NkiTensor | None = None,
                      name: str | None = None) -> NkiInstruction:
    """dst = data with the first occurrence of each of the 8 vals replaced by imm (slots visited
    7..0, so repeated values take successive positions); dst_idx gets the matched positions."""
    c = Issue("nc_match_replace8", name)
    data = _searched(c, "data", data)
    dst = c.tensor("dst", dst)
    c.same_layout("dst", dst, ("data", data))
    vals = _eight(c, "vals", vals, data.shape[0])
    c.number("imm", imm)
    writes = [("dst", dst)]
    if dst_idx is not None:
        writes.append(("dst_idx", _index_dst(c, "dst_idx", dst_idx, data.shape[0])))
    ins = c.record(VECTOR, [("data", data), ("vals", vals)], writes, {"dtype": "float32"})
    if c.prog.compute:
        d, v = rows_f32(data).numpy().copy(), rows_f32(vals).numpy()
        idx = np.full((d.shape[0], K), _sentinel(dst_idx.dtype) if dst_idx is not None else 0, np.int64)
        for p in range(d.shape[0]):
            for j, pos in _pairs(d[p], v[p], range(K - 1, -1, -1)).items():
                idx[p, j] = pos
                d[p, pos] = imm
        dtypes.store(dst.arr, torch.from_numpy(d))
        if dst_idx is not None:
            dst_idx.arr[...] = idx.reshape(dst_idx.shape).astype(dst_idx.dtype)
    return ins



# --- topk (GpSimd) -----------------------------------------------------------------------------------
TOPK_PAGE = "https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.topk.html"
TOPK_LIBRARY = ("https://github.com/aws-neuron/nki-library/blob/092a49dcdffb3ee0d63dbb71abd65dc70ca80821/"
                "src/nkilib_src/nkilib/experimental/topk/gpsimd_topk.py")
TOPK_GROUP = 16                          # partitions per problem (the snake's height)
TOPK_N_RANGE = (8, 65535)                # "8 <= n < 65536"
TOPK_K_MAX = 32767                       # "1 <= K < 32768 and K <= n"


def _topk_operand(c: Issue, role: str, t: Any, dtype: np.dtype, shape: str) -> NkiTensor:
    t = c.tensor(role, t)
    if t.buffer is not SBUF:
        c.fail(f"{role} is in {t.buffer.name}; topk's operands must be in SBUF ({TOPK_PAGE})")
    if t.dtype != dtype:
        c.fail(f"{role} dtype {t.dtype.name} is not supported; {role} must be {dtype.name}, shape {shape}")
    if t.shape[0] % TOPK_GROUP:
        c.fail(f"{role} has {t.shape[0]} partitions; topk's partition dim must be a multiple of {TOPK_GROUP} (one "
               f"problem per {TOPK_GROUP} partitions)")
    return t


def _topk_sorted(c: Issue, value: Any) -> None:
    """`sorted=` is NKI 0.7's; False (the default) is emulated, True is not (its order is not on the page)."""
    if not nki_versions.applies("topk-sorted"):
        reject_keywords("nisa.topk", nki_versions.release(), sorted=value)
    elif value is not ABSENT and not isinstance(value, (bool, np.bool_)):
        c.fail(f"sorted must be a compile-time bool, got {type(value).__name__} {value!r}")
    elif value is not ABSENT and value:
        coverage.NotEmulated("nki.isa.topk(sorted=True)",
                             "the v2.33.0 page adds sorted= (default False), but its visible text does not say in "
                             "which order sorted=True writes the k results; sort them with nisa.max8 / "
                             f"nc_match_replace8 as AWS's gpsimd_topk does ({TOPK_PAGE})").fail()


def unsorted_ranks(k: int) -> np.ndarray:
    """rank (0 = largest) of the result nkisim writes at snake position j, j < k, for sorted=False: a fixed
    scramble (j * step + k // 2) mod k, step coprime with k, about 0.62 k, so neither sorted order comes out."""
    step = max(1, round(0.618 * k))
    while np.gcd(step, k) != 1:
        step += 1
    return (np.arange(k) * step + k // 2) % k


@instruction("TOPK", engines=(GPSIMD,), cost=costs.topk_cycles, color="#a64d79")
def topk(val_dst: NkiTensor, idx_dst: NkiTensor, src: NkiTensor, n: int, sorted: Any = ABSENT,
         name: str | None = None) -> NkiInstruction:
    """Per group of 16 partitions: the k = val_dst.shape[1] largest of the group's n snake elements
    (element s at partition s % 16, position s // 16) into val_dst, their snake indices into idx_dst,
    result j at partition j % 16, position j // 16."""
    c = Issue("topk", name)
    _topk_sorted(c, sorted)
    src = _topk_operand(c, "src", src, dtypes.bfloat16, "[par_dim, src_x]")
    val_dst = _topk_operand(c, "val_dst", val_dst, dtypes.bfloat16, "[par_dim, k]")
    idx_dst = _topk_operand(c, "idx_dst", idx_dst, dtypes.uint32, "[par_dim, k]")
    for role, t in (("val_dst", val_dst), ("idx_dst", idx_dst)):
        if t.ndim != 2 or t.shape[0] != src.shape[0]:
            c.fail(f"{role} must be 2-D [{src.shape[0]}, k] (src's partitions, k results each), got {t.shape}")
    if idx_dst.shape != val_dst.shape:
        c.fail(f"idx_dst {idx_dst.shape} and val_dst {val_dst.shape} must have the same shape [par_dim, k]")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)):
        c.fail(f"n must be a compile-time int (the elements in one snake), got {type(n).__name__} {n!r}")
    n, k = int(n), val_dst.shape[1]
    if not TOPK_N_RANGE[0] <= n <= TOPK_N_RANGE[1]:
        c.fail(f"n={n} is out of range; it must satisfy {TOPK_N_RANGE[0]} <= n < {TOPK_N_RANGE[1] + 1}")
    if not 1 <= k <= min(TOPK_K_MAX, n):
        c.fail(f"k={k} (val_dst's free size) is out of range; it must satisfy 1 <= k < {TOPK_K_MAX + 1} and "
               f"k <= n={n}")
    snake_cols, out_cols = -(-n // TOPK_GROUP), -(-k // TOPK_GROUP)
    if src.elements_per_partition < snake_cols:
        c.fail(f"src has {src.elements_per_partition} elements per partition; a snake of n={n} needs "
               f"ceil(n / {TOPK_GROUP}) = {snake_cols}")
    vals, idxs = val_dst[:, 0:out_cols], idx_dst[:, 0:out_cols]
    ins = c.record(GPSIMD, [("src", src)], [("val_dst", vals), ("idx_dst", idxs)],
                   {"dtype": "bfloat16", "n": n, "k": k})
    if c.prog.compute:
        rows = rows_f32(src).numpy()[:, :snake_cols]
        placed = unsorted_ranks(k)
        val_out = np.empty((src.shape[0], out_cols), np.float32)
        idx_out = np.empty((src.shape[0], out_cols), np.uint32)
        for g in range(0, src.shape[0], TOPK_GROUP):
            snake = rows[g:g + TOPK_GROUP].T.reshape(-1)[:n]        # element s = partition s % 16, position s // 16
            by_rank = np.argsort(np.where(np.isnan(snake), -np.inf, -snake), kind="stable")[:k]
            chosen = by_rank[placed]
            for out, result in ((val_out, snake[chosen]), (idx_out, chosen)):
                flat = np.empty(out_cols * TOPK_GROUP, out.dtype)
                dtypes.fill_uninitialised(flat)                      # the last position's slots past k
                flat[:k] = result
                out[g:g + TOPK_GROUP] = flat.reshape(out_cols, TOPK_GROUP).T
        dtypes.store(vals.arr, torch.from_numpy(val_out))
        idxs.arr[...] = idx_out
    return ins


__all__ = ["max8", "nc_find_index8", "nc_match_replace8", "topk"]
