"""Top-8 search instructions: `max8`, `nc_find_index8`, `nc_match_replace8` (Vector engine).

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
"""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from . import dtypes, nki_versions
from ..costmodel import costs
from ..vocabulary import VECTOR, instruction
from .issue import Issue, NkiInstruction, rows_f32
from .tensor import NkiTensor

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


__all__ = ["max8", "nc_find_index8", "nc_match_replace8"]
