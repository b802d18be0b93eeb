"""Kernel launches: `nki.jit`, `kernel[lnc](...)`, programs, the trace and the SBUF footprint.

A launch runs the kernel body eagerly, once per program (program_id 0 then 1 for `kernel[2]`;
sequential execution is exact for race-free kernels). Each program has its own SBUF, PSUM,
private HBM and 128-lane activation accumulator; kernel arguments and `nl.shared_hbm`
allocations are shared. `shared_hbm` tensors allocated inside the kernel are matched across
programs by allocation order (shape and dtype must agree), so both programs write one output.
With LNC=2 the emulator also rejects a program writing shared HBM elements that another program
already wrote (the two cores would race on hardware).

SBUF footprint rule: an SBUF allocation is live from the first instruction that touches it
(normally its first write) to the last instruction that reads or writes it; a program's footprint
is the peak, over its instruction stream, of the summed per-partition bytes (free elements x
itemsize of the whole allocation) of the live allocations. A launch whose peak exceeds
`SBUF_USABLE_BYTES_PER_PARTITION` raises `NkiValidationError` (also in dry run). This models the
compiler's allocator reusing the space of dead tiles; it agrees with the published LayerNorm-fold
footprint H*(8+2B) bytes per tile and partition (z's slot reused): 200 KiB compiled, 210 KiB failed.

Dry run (`run(..., dry_run=True)`, or any torch fake/meta tensor argument): every check and the
trace, no arithmetic; outputs are placeholders of the right shape and dtype.
"""
from __future__ import annotations

import functools
import inspect
import os
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from . import dtypes
from .errors import NkiValidationError, kernel_location, strip_internal_frames
from .tensor import ARG_HBM, SBUF, SHARED_HBM, Buffer, NkiTensor, Storage
from .trace import DmaInfo, Instruction, Trace

# nki-library's usable SBUF per partition on trn2 (224 KiB physical, minus compiler reservations).
SBUF_USABLE_BYTES_PER_PARTITION = 212_728
ACCUMULATOR_LANES = 128
TARGETS = ("trn2", "gen3")
_JIT_OPTIONS = ("mode", "platform_target", "debug_kernel", "show_compiler_tb", "additional_compile_opt")


@dataclass
class _Live:
    """The live range of one SBUF allocation. It keeps a description of the allocation, not the
    allocation, so a dead tile's memory is freed (and reused, cache-warm) while the kernel runs on."""

    name: str
    shape: tuple[int, ...]
    dtype: np.dtype
    bytes_per_partition: int
    source: str
    first: int
    last: int

    @classmethod
    def of(cls, st: Storage, index: int) -> "_Live":
        return cls(st.name, st.data.shape, st.data.dtype, st.bytes_per_partition, st.source, index, index)

    def describe(self) -> str:
        return (f"{self.name or 'tensor'} {self.shape} {self.dtype.name} = {self.bytes_per_partition} B "
                f"({self.source})")


class Program:
    """The state of one physical core while it runs the kernel body."""

    def __init__(self, launch: "Launch", program_id: int) -> None:
        self.launch = launch
        self.id = program_id
        self.count = 0
        self.accumulator = np.zeros(ACCUMULATOR_LANES, np.float32)
        self.sbuf: dict[int, _Live] = {}
        self.shared_allocs = 0

    @property
    def compute(self) -> bool:
        return not self.launch.dry_run

    def allocate(self, shape: tuple[int, ...], dtype: np.dtype, buffer: Buffer, name: str,
                 source: str, fill: Callable[[np.ndarray], None] | None) -> NkiTensor:
        if buffer is SHARED_HBM:
            storage = self.launch.shared_storage(self, shape, dtype, name, source, fill)
        else:
            storage = self.launch.new_storage(buffer, np.empty(shape, dtype), self.id, name, source)
            if self.compute:
                storage.pending_fill = fill or dtypes.fill_uninitialised
        return NkiTensor(storage, storage.data)

    def record(self, isa: str, opcode: str, engine: str, name: str | None, source: str,
               reads: list[tuple[str, NkiTensor]], writes: list[tuple[str, NkiTensor]],
               attrs: dict[str, Any], dma: DmaInfo | None = None, epp: int | None = None) -> Instruction:
        index = self.count
        partitions = -1         # the most partitions of any on-chip operand (1 if none is on chip)
        for _, t in reads + writes:
            if t.buffer.on_chip:
                partitions = max(partitions, t.partitions)
                if t.buffer is SBUF:
                    live = self.sbuf.get(t.storage.id)
                    if live is None:
                        self.sbuf[t.storage.id] = _Live.of(t.storage, index)
                    else:
                        live.last = index
        r = tuple([t.operand(role) for role, t in reads])
        w = tuple([t.operand(role) for role, t in writes])
        if epp is None:
            epp = max([o.elements_per_partition for o in r + w])
        ins = Instruction(index, self.id, isa, opcode, engine, name, source, epp, 1 if partitions < 0 else partitions,
                          r, w, attrs, dma)
        self.launch.trace.instructions.append(ins)
        for _, t in writes:
            t.storage.written = True
        if self.compute:        # a dry run writes nothing: its outputs are filled whole at the end
            for _, t in reads:
                if t.storage.pending_fill is not None:
                    t.storage.materialise()
            for _, t in writes:
                if t.storage.pending_fill is not None:
                    t.storage.note_write(t.arr, t.byte_offset)
        self.count = index + 1
        return ins

    def sbuf_peak(self) -> tuple[int, int]:
        """(peak bytes per partition, instruction index where it is reached)."""
        if not self.sbuf:
            return 0, -1
        delta = np.zeros(self.count + 1, np.int64)
        for live in self.sbuf.values():
            delta[live.first] += live.bytes_per_partition
            delta[live.last + 1] -= live.bytes_per_partition
        running = np.cumsum(delta)
        at = int(np.argmax(running))
        return int(running[at]), at

    def live_at(self, index: int) -> list[_Live]:
        return [l for l in self.sbuf.values() if l.first <= index <= l.last]

    def note_shared_write(self, t: NkiTensor, isa: str, where: str) -> None:
        """LNC>1: reject writes to shared HBM elements another program already wrote."""
        st = t.storage
        mask = st.written_mask.setdefault(self.id, np.zeros(st.data.size, np.bool_))
        view = _mask_view(mask, t)
        for other, other_mask in st.written_mask.items():
            if other != self.id and _mask_view(other_mask, t).any():
                raise NkiValidationError(
                    f"{isa}: program {self.id} writes elements of shared HBM tensor '{st.name}' "
                    f"(shape {st.data.shape}) that program {other} already wrote; with LNC={self.launch.lnc} "
                    f"each program must own disjoint rows, e.g. chosen by nl.program_id(0) ({where})")
        view[...] = True


def _mask_view(mask: np.ndarray, t: NkiTensor) -> np.ndarray:
    isz = t.storage.data.itemsize
    strides = tuple(s // isz for s in t.arr.strides)
    return np.lib.stride_tricks.as_strided(mask[t.offset:], t.arr.shape, strides)


class Launch:
    """One kernel launch: its programs' shared state and the trace."""

    def __init__(self, kernel_name: str, lnc: int, dry_run: bool) -> None:
        self.lnc = lnc
        self.dry_run = dry_run
        self.trace = Trace(kernel=kernel_name, lnc=lnc, dry_run=dry_run)
        self.shared: list[Storage] = []
        self.next_id = 0

    def new_storage(self, buffer: Buffer, data: np.ndarray, program: int | None, name: str, source: str) -> Storage:
        self.next_id += 1
        return Storage(self.next_id, buffer, data, program, name, source)

    def shared_storage(self, prog: Program, shape, dtype, name, source, fill) -> Storage:
        i = prog.shared_allocs
        prog.shared_allocs += 1
        if i < len(self.shared):
            st = self.shared[i]
            if st.data.shape != tuple(shape) or st.data.dtype != dtype:
                raise NkiValidationError(
                    f"nl.ndarray: program {prog.id} allocated shared_hbm tensor #{i} as {tuple(shape)} {dtype.name}, "
                    f"program 0 as {st.data.shape} {st.data.dtype.name}; all programs must allocate the same "
                    f"shared tensors in the same order ({source})")
            return st
        st = self.new_storage(SHARED_HBM, np.empty(shape, dtype), None, name, source)
        st.pending_fill = fill or dtypes.fill_uninitialised   # also in dry run: outputs read as "never written"
        self.shared.append(st)
        return st


_current: Program | None = None
_last_trace: Trace | None = None


def current(api: str, api_name: str = "") -> Program:
    """The running program; `api + api_name` names the caller in the error (joined only on failure)."""
    if _current is None:
        raise NkiValidationError(
            f"{api}{api_name} called outside a running NKI kernel: call it inside an @nki.jit function "
            f"({kernel_location()})")
    return _current


def last_trace() -> Trace | None:
    """The trace of the most recent kernel launch (normal call, `run`, or a custom op)."""
    return _last_trace


@dataclass
class Run:
    """What `run` returns: the kernel's outputs, its trace and its peak SBUF bytes per partition."""

    outputs: Any
    trace: Trace
    sbuf_peak_bytes: int = 0


class Kernel:
    """What `nki.jit` returns. Call it (`kernel(x)`, LNC=1) or index it (`kernel[2](x)`)."""

    def __init__(self, fn: Callable, options: dict[str, Any]) -> None:
        for opt, value in options.items():
            if opt not in _JIT_OPTIONS:
                raise TypeError(f"nki.jit() got an unexpected keyword argument '{opt}'")
            if opt == "platform_target" and str(value) not in TARGETS:
                raise NkiValidationError(f"nki.jit: platform_target={value!r}; nkisim emulates trn2 only")
        sig = inspect.signature(fn)
        if any(p.kind is p.KEYWORD_ONLY for p in sig.parameters.values()):
            raise NkiValidationError(
                f"nki.jit: kernel '{fn.__name__}' has keyword-only parameters (a bare '*'); NKI kernels do not "
                f"support them ({_def_location(fn)})")
        self.fn = fn
        functools.update_wrapper(self, fn)

    def __getitem__(self, grid: Any) -> "_Launcher":
        lnc = grid[0] if isinstance(grid, tuple) and len(grid) == 1 else grid
        if not isinstance(lnc, int) or isinstance(lnc, bool) or lnc not in (1, 2):
            raise NkiValidationError(
                f"NCC_EARG001 Unsupported Logical Neuron Core (LNC) configuration: kernel[{grid!r}]; trn2 supports "
                f"LNC 1 or 2 ({kernel_location()})")
        return _Launcher(self, lnc)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        return self[1](*args, **kwargs)


class _Launcher:
    def __init__(self, kernel: Kernel, lnc: int) -> None:
        self.kernel = kernel
        self.lnc = lnc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if _current is not None:          # a kernel called from a kernel is inlined (a sub-kernel)
            return self.kernel.fn(*args, **kwargs)
        return launch(self.kernel, args, kwargs, self.lnc, dry_run=False).outputs


def jit(fn: Callable | None = None, **options: Any) -> Any:
    """`@nki.jit` / `@nki.jit(...)`: make a launchable kernel."""
    if fn is None:
        return lambda f: Kernel(f, options)
    return fn if isinstance(fn, Kernel) else Kernel(fn, options)


def simulate(kernel: Any) -> Callable:
    """`nki.simulate(kernel)` / `nki.simulate(kernel[2])`: the same emulated call."""
    if isinstance(kernel, (Kernel, _Launcher)):
        return kernel
    return Kernel(kernel, {})


def run(kernel: Any, *args: Any, lnc: int = 1, dry_run: bool = False, **kwargs: Any) -> Run:
    """Launch `kernel` on the emulator and return outputs, trace and SBUF peak.

    `kernel` is an emulator jit kernel, a plain function, or a kernel made by the real Neuron SDK's
    `nki.jit` (its function is re-created over the emulator's `nki`, see `foreign.py`): on a trn2
    instance this is still the emulator's run (CPU tensors); device runs are `kernel(...)` directly."""
    __tracebackhide__ = True
    from .foreign import emulated  # foreign.py builds emulator Kernels, so it imports this module

    k = kernel.kernel if isinstance(kernel, _Launcher) else emulated(kernel)
    k[lnc]  # validates lnc
    return launch(k, args, kwargs, lnc, dry_run)


def _def_location(fn: Callable) -> str:
    code = fn.__code__
    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"


def _check_target() -> None:
    target = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    if target not in TARGETS:
        raise NkiValidationError(
            f"NEURON_PLATFORM_TARGET_OVERRIDE={target}: nkisim emulates trn2 (gen3) only")


def _check_lnc_env(lnc: int) -> None:
    env = os.environ.get("NEURON_LOGICAL_NC_CONFIG")
    if env is None or env.strip() == str(lnc):
        return
    # The variable configures the device runtime. With the real SDK installed, nkisim only runs
    # beside the device (traces and dry runs for the cost model), so the device's LNC does not bind it.
    from ..backend import real_sdk_dir

    if real_sdk_dir() is None:
        raise NkiValidationError(
            f"kernel launched with LNC={lnc} but NEURON_LOGICAL_NC_CONFIG={env}; the launch degree must equal "
            f"the runtime's LNC ({kernel_location()})")


class _Args:
    """Kernel arguments converted to HBM tensors, and how to convert results back."""

    def __init__(self, launch_: Launch, buffer: Buffer) -> None:
        self.launch = launch_
        self.buffer = buffer
        self.torch_like: torch.Tensor | None = None
        self.fake = False
        self.write_back: list[tuple[Any, Storage]] = []

    def convert(self, value: Any, label: str) -> Any:
        if isinstance(value, list):
            raise NkiValidationError(f"kernel argument {label} is a list; NKI kernels take tuples")
        if isinstance(value, tuple):
            return tuple(self.convert(v, f"{label}[{i}]") for i, v in enumerate(value))
        if isinstance(value, torch.Tensor):
            return self._from_torch(value, label)
        if isinstance(value, np.ndarray):
            return self._storage(value, value, label)
        return value  # Python numbers, dtypes, enums...: compile-time constants

    def _from_torch(self, t: torch.Tensor, label: str) -> NkiTensor:
        dt = dtypes.resolve(t.dtype)
        if dt is None:
            raise NkiValidationError(f"kernel argument {label}: dtype {t.dtype} is not an NKI dtype ({dtypes.names()})")
        self.torch_like = t if self.torch_like is None else self.torch_like
        if _is_fake(t):
            self.fake = True
            return self._storage(None, np.empty(tuple(t.shape), dt), label)
        if t.device.type != "cpu":
            raise NkiValidationError(f"kernel argument {label}: nkisim runs on CPU tensors, got device {t.device}")
        return self._storage(t, dtypes.numpy_from_torch(t.detach()), label)

    def _storage(self, original: Any, arr: np.ndarray, label: str) -> NkiTensor:
        if dtypes.resolve(arr.dtype) is None:
            raise NkiValidationError(f"kernel argument {label}: dtype {arr.dtype} is not an NKI dtype ({dtypes.names()})")
        data = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
        st = self.launch.new_storage(self.buffer, data, None, f"arg{label}", "<argument>")
        if data is not arr:             # work on a contiguous copy, write it back if the kernel wrote it
            self.write_back.append((original, st))
        return NkiTensor(st, data)

    def output(self, t: NkiTensor) -> Any:
        if self.torch_like is None:
            return t.arr
        if self.fake:
            return torch.empty(t.shape, dtype=dtypes.to_torch_dtype(t.dtype), device=self.torch_like.device)
        return dtypes.torch_from_numpy(t.arr)

    def finish(self) -> None:
        for original, st in self.write_back:
            if not st.written:
                continue
            if isinstance(original, torch.Tensor):
                original.detach().copy_(dtypes.torch_from_numpy(st.data))
            else:
                original[...] = st.data


def _is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor) or t.device.type == "meta"


def launch(kernel: Kernel, args: tuple, kwargs: dict, lnc: int, dry_run: bool) -> Run:
    """Run all programs of one launch; errors come back without emulator frames."""
    __tracebackhide__ = True
    try:
        return _launch(kernel, args, kwargs, lnc, dry_run)
    except NkiValidationError as err:
        raise err.with_traceback(strip_internal_frames(err.__traceback__)) from None


def _launch(kernel: Kernel, args: tuple, kwargs: dict, lnc: int, dry_run: bool) -> Run:
    __tracebackhide__ = True    # IPython and pytest show the kernel's frame, not this one
    global _current, _last_trace
    _check_target()
    _check_lnc_env(lnc)
    fn = kernel.fn
    if not args and not kwargs:
        raise NkiValidationError(f"kernel '{fn.__name__}' called with no arguments; pass its input tensors")
    the_launch = Launch(fn.__name__, lnc, dry_run)
    conv = _Args(the_launch, SHARED_HBM if lnc > 1 else ARG_HBM)
    c_args = tuple(conv.convert(a, str(i)) for i, a in enumerate(args))
    c_kwargs = {k: conv.convert(v, k) for k, v in kwargs.items()}
    if conv.fake:
        the_launch.dry_run = the_launch.trace.dry_run = True
    results, peaks = [], []
    for pid in range(lnc):
        prog = Program(the_launch, pid)
        _current = prog
        try:
            results.append(fn(*c_args, **c_kwargs))
        finally:
            _current = None
        peak, at = prog.sbuf_peak()
        the_launch.trace.sbuf_peak_bytes_per_partition[pid] = peak
        peaks.append((peak, at, prog))
    for st in the_launch.shared:
        st.materialise()
    _last_trace = the_launch.trace
    _check_sbuf_capacity(fn, peaks)
    outputs = _outputs(fn, results[0], conv)
    if not the_launch.dry_run:
        conv.finish()
    return Run(outputs, the_launch.trace, max(p for p, _, _ in peaks))


def _check_sbuf_capacity(fn: Callable, peaks: list[tuple[int, int, Program]]) -> None:
    for peak, at, prog in peaks:
        if peak <= SBUF_USABLE_BYTES_PER_PARTITION:
            continue
        live = sorted(prog.live_at(at), key=lambda l: -l.bytes_per_partition)
        top = "; ".join(l.describe() for l in live[:5])
        raise NkiValidationError(
            f"SBUF capacity: program {prog.id} needs {peak} bytes per partition at its peak, exceeding the usable "
            f"{SBUF_USABLE_BYTES_PER_PARTITION} bytes per partition of trn2; largest live allocations: {top} "
            f"({_def_location(fn)})")


def _described(t: NkiTensor) -> str:
    return f"'{t.name}'" if t.name else f"an unnamed {list(t.shape)} tensor"


def _outputs(fn: Callable, result: Any, conv: _Args) -> Any:
    if result is None:
        return None
    if isinstance(result, (tuple, list)):
        return type(result)(_outputs(fn, r, conv) for r in result)
    if not isinstance(result, NkiTensor):
        raise NkiValidationError(
            f"kernel '{fn.__name__}' returned {type(result).__name__}; kernels return shared_hbm tensors "
            f"({_def_location(fn)})")
    if result.buffer is not SHARED_HBM:
        raise NkiValidationError(
            f"kernel '{fn.__name__}' returns {_described(result)}, which is in {result.buffer.name}; kernel "
            f"outputs must be allocated with buffer=nl.shared_hbm ({result.storage.source})")
    return conv.output(result)
