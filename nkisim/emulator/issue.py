"""What every `nki.isa` instruction does around its arithmetic: validate operands with errors that
name the instruction, the operand and the limit (and the kernel line), then append one
`Instruction` to the running program's trace. Instruction modules import this, never each other.
"""
from __future__ import annotations

import contextlib
import sys
from typing import Any, Callable, Iterator, NoReturn

import numpy as np
import torch

from .. import vocabulary
from ..limits import FREE_DIMS_MAX, FREE_ELEMENTS_MAX, FREE_STRIDE_RANGE, PARTITIONS, START_PARTITIONS
from . import dtypes, nki_versions, psum, views
from .cores import Covered, current
from .enums import NkiEnum, engine
from .errors import NkiValidationError, kernel_location
from .instruction_handle import NkiInstruction
from .ops import OPS, Op, activation_names, alu_names
from .tensor import PSUM, SHARED_HBM, NkiTensor
from .trace import DmaInfo
from .tile_grids import NkiGrid


# Free dims (tile rank - 1) the NKI 0.7 reference pages allow per instruction and operand (nki_versions
# row per-api-free-dims). Counted on the tile's shape: `Issue.access_pattern` counts the dims left after
# merging contiguous ones, so a contiguous over-rank tile passes that rule.
FREE_DIMS_PER_API: dict[str, dict[str, int]] = {
    "tensor_partition_reduce": {"data": 4, "dst": 4},
    "memset": {"dst": 4},
    "tensor_scalar_reduce": {"data": 3, "dst": 3},
    "bn_aggr": {"data": 4, "dst": 2},
    "reciprocal": {"data": 4, "dst": 4},
    "tensor_copy_predicated": {"dst": 3, "predicate": 3, "src": 3},
    "max8": {"src": 4, "dst": 2},
}


_via: str | None = None
# the instructions that move nl.int64 (NKI 0.7): "Unlike the compute instructions, scalar_load accepts nl.int64"
# (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.scalar_load.html); a DMA
# moves any dtype's bytes
_INT64_MOVERS = frozenset({"dma_copy", "scalar_load", "scalar_store"})


@contextlib.contextmanager
def lowering(api: str) -> Iterator[None]:
    """Label instructions issued on behalf of an `nl.*` callable (errors say `nl.exp -> activation`)."""
    global _via
    outer, _via = _via, api
    try:
        yield
    finally:
        _via = outer


class Issue:
    """Validation helpers and trace record of one call of the registered instruction `isa`."""

    __slots__ = ("isa", "spec", "label", "where", "prog", "name", "arguments", "indirect_views")

    def __init__(self, isa: str, name: Any) -> None:
        self.isa = isa
        self.spec = vocabulary.spec(isa)
        self.label = f"{_via} -> {isa}" if _via else isa
        self.where = kernel_location()
        self.prog = current("nisa.", isa)
        # inside a dynamic loop: the call's arguments (the nki.isa function's parameters), for its body check
        bodies = self.prog.loop_bodies
        self.arguments = dict(sys._getframe(1).f_locals) if bodies and bodies[-1].checking else None
        self.indirect_views: dict[int, NkiTensor] | None = None   # in a loop body: id(resolved operand) -> its view
        if name is not None and not isinstance(name, str):
            self.fail(f"name must be a str label, got {type(name).__name__}")
        self.name = name

    def fail(self, msg: str) -> NoReturn:
        raise NkiValidationError(f"{self.label}: {msg} ({self.where})")

    def tensor(self, role: str, t: Any, on_chip: bool = True, indirect: bool = False) -> NkiTensor:
        """The operand, checked. An indirect view stays indirect only for the DMA instructions that
        address through it (`indirect=True`); elsewhere its index is read now (scalar offset)."""
        if isinstance(t, views.OutOfBoundsView):
            self.fail(f"{role} {t.why}")
        if not isinstance(t, NkiTensor):
            grid = "; a tile grid's operand is its .data" if isinstance(t, NkiGrid) else ""
            self.fail(f"{role} must be an NKI tensor, got {type(t).__name__}{grid}")
        if t.dtype == dtypes.int64 and self.isa not in _INT64_MOVERS:
            self.fail(f"{role} is an nl.int64 tensor; only nisa.dma_copy and nisa.scalar_load / scalar_store take "
                      f"64-bit integers (the nki.isa.scalar_load page: \"Unlike the compute instructions, scalar_load "
                      f"accepts nl.int64\"); compute on nl.int32")
        if t.storage.scope_ended:
            self.fail(f"{role} is a tensor allocated at {t.storage.source}, in {t.storage.scope_ended}: a tensor "
                      f"declared inside a loop body function cannot be referenced outside of the loop (the migration "
                      f"guide to NKI 0.6, rules for migrated loops); allocate it before the loop")
        if t.indirection is not None and not indirect:
            view = t
            t = views.resolve(t, lambda msg: self.fail(f"{role}: {msg}"), self.prog.compute)
            if self.arguments is not None:
                self.indirect_views = {**(self.indirect_views or {}), id(t): view}
        if t.arr.size == 0:
            # a tensor's shape is a "tuple of positive integers" (nki.language.NkiTensor reference page)
            self.fail(f"{role} is an empty view of shape {t.shape}: an NKI tensor's shape is a tuple of positive "
                      f"integers, so an operand covers at least one element (an empty slice such as t[:, 8:8] is not an "
                      f"operand; https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/"
                      f"nki.language.NkiTensor.html)")
        limit = FREE_DIMS_PER_API.get(self.isa, {}).get(role)
        if limit is not None and t.ndim - 1 > limit and nki_versions.applies("per-api-free-dims"):
            self.fail(f"{role} has {t.ndim - 1} free dimensions (shape {t.shape}); at most {limit} (rank {limit + 1} "
                      f"incl. the partition dim) on NKI 0.7 (the v2.33.0 nki.isa.{self.isa} page)")
        if on_chip and not t.buffer.on_chip:
            self.fail(f"{role} is in {t.buffer.name}; {self.isa} operands must be in SBUF or PSUM "
                      f"(move HBM data with nisa.dma_copy)")
        if t.buffer.on_chip:
            if t.shape[0] > PARTITIONS:
                self.fail(f"{role} partition dimension {t.shape[0]} exceeds maximum {PARTITIONS}")
            limit = FREE_ELEMENTS_MAX[t.buffer.name]
            if t.elements_per_partition > limit:
                self.fail(f"{role} free size {t.elements_per_partition} elements per partition exceeds maximum "
                          f"{limit} for one {t.buffer.name} access")
            if on_chip:
                self.access_pattern(role, t)
        return t

    def access_pattern(self, role: str, t: NkiTensor) -> None:
        """A compute engine's SBUF/PSUM access (nkisim.limits, from the trn2 architecture guide):
        consecutive partitions from an allowed start partition, <= 4 free dims, int16 strides."""
        arr, row = t.arr, t.storage.data.strides[0]
        parts = arr.shape[0]
        if parts > 1 and arr.strides[0] != row:
            self.fail(f"{role} takes every {arr.strides[0] // row}th partition (partition step "
                      f"{arr.strides[0] // row}); an engine accesses consecutive partitions only (no partition "
                      f"striding)")
        start = t.storage.partition_offset + t.byte_offset // row      # physical: after an address= placement
        allowed = next(starts for most, starts in START_PARTITIONS if parts <= most)
        if start not in allowed:
            placed = f" (its tile starts at partition {t.storage.partition_offset} by address=)" if t.storage.placed else ""
            self.fail(f"{role} covers {parts} partitions from start partition {start}{placed}; an access of {parts} "
                      f"partitions must start at partition {_spoken(allowed)}")
        dims = _free_dims(arr)
        if len(dims) > FREE_DIMS_MAX:
            self.fail(f"{role} view {t.shape} needs {len(dims)} free dimensions in its access pattern; an engine "
                      f"access has at most {FREE_DIMS_MAX}")
        lo, hi = FREE_STRIDE_RANGE
        for size, stride in dims:
            if not lo <= stride <= hi:
                self.fail(f"{role} view {t.shape} steps by stride {stride} elements in a free dimension; access "
                          f"pattern strides are int16 ({lo}..{hi} elements)")

    def same_layout(self, ref_role: str, ref: NkiTensor, *others: tuple[str, NkiTensor]) -> None:
        for role, t in others:
            if t.shape[0] != ref.shape[0]:
                self.fail(f"{role} has {t.shape[0]} partitions but {ref_role} has {ref.shape[0]}; they must match")
            if t.elements_per_partition != ref.elements_per_partition:
                self.fail(f"{role} has {t.elements_per_partition} elements per partition but {ref_role} has "
                          f"{ref.elements_per_partition}; they must match")

    def integer_operands(self, op: Op, *operands: tuple[str, NkiTensor]) -> None:
        """Bit-vector ops work on raw integer bits: every operand needs an integer dtype
        (SDK:nki/api/nki.api.shared.rst, ALU operator table)."""
        if op.bitvec and any(t.dtype not in dtypes.INTS for _, t in operands):
            self.fail(f"op={op!r} is a bit-vector op; all operands must have integer dtypes, got "
                      + ", ".join(f"{role} {t.dtype.name}" for role, t in operands))

    def column(self, role: str, t: NkiTensor, partitions: int, fp32: bool) -> NkiTensor:
        """A per-partition [P, 1] operand tile."""
        self.tensor(role, t)
        if t.shape[0] != partitions or t.elements_per_partition != 1:
            self.fail(f"{role} must be a [{partitions}, 1] tile (one value per partition), got shape {t.shape}"
                      + ("; its free size must be 1" if t.shape[0] == partitions else ""))
        if fp32 and t.dtype != dtypes.float32:
            self.fail(f"{role} tile must be float32, got {t.dtype.name}")
        return t

    def op(self, role: str, op: Any, kind: str) -> Op:
        # nl.max / nl.min stand for the maximum / minimum ALU op (their `isa_operator`): the v2.33.0
        # tensor_scalar_reduce page's reduce_op is "any of nl.add, nl.multiply, nl.max or nl.min", and AWS's
        # nki-library passes them as tensor_reduce, tensor_partition_reduce and tensor_tensor ops (foreach_norm)
        op = OPS.get(getattr(op, "isa_operator", None) or "", op)
        if not isinstance(op, Op):
            self.fail(f"{role} must be an nki.language operator such as nl.add, got {type(op).__name__} {spelled(op)}")
        if op.callable_only and _via != repr(op):
            self.fail(f"{role}={op!r} is an nki.language function, not an operator of the ISA's ALU or activation "
                      f"tables (nki.api.shared); call {op!r}(...) on the tile instead")
        if kind == "alu" and not op.is_alu:
            self.fail(f"{role}={op!r} is not an ALU operator (ALU ops: {alu_names()})")
        if kind == "act" and op.act is None:
            self.fail(f"{role}={op!r} is not an activation function (activation table: {activation_names()})")
        return op

    def enum(self, role: str, value: Any, cls: type[NkiEnum]) -> Any:
        if not isinstance(value, cls):
            named = cls._value2member_map_.get(value) if type(value) is int else None
            hint = (f": raw integer enum constants are no longer accepted since NKI 0.3.0 (its release notes' breaking "
                    f"changes); write nisa.{cls.__name__}.{named.name}" if named is not None else "")
            self.fail(f"{role} must be a nki.isa.{cls.__name__} member (e.g. nisa.{cls.__name__}."
                      f"{list(cls)[0].name}), got {type(value).__name__} {value!r}{hint}")
        return value

    def lane(self, value: Any, default: str | None = None) -> str:
        """The engine the `engine=` argument selects among the registered ones (`default`, else the
        registered default, for engine.unknown)."""
        self.enum("engine", value, engine)
        allowed = self.spec.engines
        if value is engine.unknown:
            return default or allowed[0]
        lane = vocabulary.ENGINE_BY_NISA_NAME.get(value._name_)
        if lane not in allowed:
            names = {v: k for k, v in vocabulary.ENGINE_BY_NISA_NAME.items()}
            self.fail(f"engine={value!r} is not allowed; {self.isa} runs on "
                      + ", ".join(f"nisa.engine.{names[e]}" for e in allowed))
        return lane

    def number(self, role: str, value: Any) -> None:
        if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
            self.fail(f"{role} must be a compile-time number or a tile, got {type(value).__name__} {value!r}")

    def record(self, lane: str, reads: list, writes: list, attrs: dict,
               dma: DmaInfo | None = None, epp: int | None = None) -> NkiInstruction:
        """Append this call to the trace as the registered opcode on `lane`."""
        # "GpSimd Engine cannot access PSUM" (SDK:nki/api/nki/isa/__init__.py tensor_copy, tensor_tensor)
        if lane == vocabulary.GPSIMD:
            role = next((r for r, t in reads + writes if t.buffer is PSUM), None)
            if role is not None:
                self.fail(f"{role} is in psum, but this instruction runs on GpSimd, and GpSimd cannot access "
                          f"PSUM; use the Vector (or Scalar) engine for PSUM operands")
        # The Tensor engine writes (accumulates) into one PSUM bank; Vector/Scalar reads and writes
        # may span banks (nki-autotune's kernel_15, measured on trn2, memsets and copies 4 banks at once)
        for role, t in writes if lane == vocabulary.TENSOR else ():
            if t.buffer is PSUM and (problem := psum.operand_problem(t)):
                self.fail(f"{role}: {problem}")
        if _via:
            attrs["via"] = _via
        if self.arguments is not None:      # the body check compares a resolved view by its indirect (static) form
            views_of = self.indirect_views or {}
            self.prog.loop_bodies[-1].note(self.isa, lane, self.where, [(r, views_of.get(id(t), t)) for r, t in reads],
                                           [(r, views_of.get(id(t), t)) for r, t in writes], self.arguments)
        return NkiInstruction(self.prog.record(self.isa, self.spec.opcode, lane, self.name, self.where, reads,
                                               writes, attrs, dma, epp), self.prog)


    def race_check(self, reads: list[NkiTensor], writes: list[NkiTensor], oob_skip: bool = False) -> Callable[[], None]:
        """LNC>1: the cross-core race check of the shared-HBM operands among `reads` and `writes`
        (cores.Program.note_shared_read / note_shared_write), indirect views by the elements their
        index values address (out-of-bounds ones fail unless `oob_skip`; a dry run has no index
        values, so it checks direct views only). Reads are checked now; call the returned function
        once the instruction has written, to compare the values written."""
        prog = self.prog
        if prog.launch.lnc == 1 or prog.check_only:
            return _no_check
        for t in reads:
            if t.buffer is SHARED_HBM and (t.indirection is None or prog.compute):
                prog.note_shared_read(self._covered(t, oob_skip), self.label, self.where)
        checks = [prog.note_shared_write(self._covered(t, oob_skip), self.label, self.where) for t in writes
                  if t.buffer is SHARED_HBM and (t.indirection is None or prog.compute)]
        checks = [check for check in checks if check is not None]
        if not checks:
            return _no_check

        def after_the_writes() -> None:
            for check in checks:
                check()
        return after_the_writes

    def _covered(self, t: NkiTensor, oob_skip: bool) -> Covered:
        if t.indirection is None:
            return Covered(t)
        return Covered(t, views.storage_elements(t, oob_skip, self.fail))


_LANGUAGE = f"{__package__}.language"   # the module behind nki.language's Python functions


def spelled(op: Any) -> str:
    """An operator argument as the kernel wrote it: `nl.max`, not the Python function behind it."""
    name = getattr(op, "__name__", None)
    return f"nl.{name}" if name and getattr(op, "__module__", None) == _LANGUAGE else repr(op)


def _no_check() -> None:
    """race_check's result when no shared-HBM write overlapped another program's access."""


def _free_dims(arr: np.ndarray) -> list[tuple[int, int]]:
    """(size, element stride) of the free dims an access pattern needs: size-1 dims dropped,
    a dim merged into the next one where it steps over it exactly."""
    dims: list[tuple[int, int]] = []
    for size, stride in zip(arr.shape[1:], arr.strides[1:]):
        if size == 1:
            continue
        stride //= arr.itemsize
        if dims and dims[-1][1] == stride * size:
            dims[-1] = (dims[-1][0] * size, stride)
        else:
            dims.append((size, stride))
    return dims


def _spoken(starts: tuple[int, ...]) -> str:
    return " or ".join(str(s) for s in starts) if len(starts) < 3 else ", ".join(map(str, starts[:-1])) + f" or {starts[-1]}"


def rows_f32(t: NkiTensor) -> torch.Tensor:
    """Values as fp32, one row per partition."""
    return dtypes.load_f32(t.arr).reshape(t.shape[0], -1)


def rows_int(t: NkiTensor) -> torch.Tensor:
    """Integer values, one row per partition (native integer arithmetic)."""
    return dtypes.load_int(t.arr).reshape(t.shape[0], -1)


def rows_bits(t: NkiTensor) -> torch.Tensor:
    """Integer elements as bit patterns, one row per partition (bit-vector ops; `dtypes.load_bits`)."""
    return dtypes.load_bits(t.arr).reshape(t.shape[0], -1)


def scalar_stage(op: Op, x: torch.Tensor, operand: Any, reverse: bool, bitvec: bool) -> torch.Tensor:
    """One stage `x op operand` (operand op x if reverse) of a tensor-scalar pipeline; operand is a
    number or a [P, 1] tile broadcast along the free dims."""
    if op.binary is None:
        return op.unary(x)
    if isinstance(operand, NkiTensor):
        y = rows_bits(operand) if bitvec else rows_f32(operand)
    else:
        y = torch.tensor(operand, dtype=torch.int64 if bitvec else torch.float32)
    return op.binary(y, x) if reverse else op.binary(x, y)
