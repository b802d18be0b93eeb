"""Kernel launches: `nki.jit`, `kernel[lnc](...)`, argument conversion and results.

A launch runs the kernel body eagerly, once per program (program_id 0 then 1 for `kernel[2]`;
sequential execution is exact for race-free kernels); per-core state lives in `cores`. Under LNC=2
a program that must wait for the other (core_barrier, sendrecv) hands over the turn (`interleave`). A launch
whose SBUF peak exceeds `SBUF_USABLE_BYTES_PER_PARTITION` either spills (an `NkiSpillWarning`; the
trace's `spills` carry the traffic) or, where one instruction's own allocations do not fit, raises
`NkiValidationError` (also in dry run; `allocation.py`). A kernel whose code reads global or closure data launches through `compile_cache`, which
fails a launch that trn2 would serve from a compiled kernel made with other values of that data.

Dry run (`run(..., dry_run=True)`, or any torch fake/meta tensor argument): every check and the
trace, no arithmetic; outputs are placeholders of the right shape and dtype.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import os
import warnings
from dataclasses import dataclass, fields, is_dataclass
from typing import Any, Callable

import numpy as np
import torch
from torch.utils._pytree import tree_leaves

from . import allocation, compile_cache, compiled_call, cores, coverage, dtypes, eager_gradient, nki_versions, schedule
from .compiler import CompileConfig, SpecializationConfig
from .cores import Launch, Program
from . import isa, language
from .errors import (NkiArgumentError, NkiRaceWarning, NkiSpillWarning, NkiValidationError, NkiWarning, kernel_location,
                     strip_internal_frames, user_error)
from .interleave import Interleaver
from .loop_bodies import divergent_control_flow
from .frontend import check_arguments, check_kernel, return_location
from .psum import check_bank_count
from .tensor import PRIVATE_HBM, SHARED_HBM, Buffer, NkiTensor, Storage
from .trace import Allocation, Trace
from ..gc_paused import gc_paused
from ..limits import SBUF_USABLE_BYTES_PER_PARTITION

TARGETS = ("trn2", "gen3")
# nki.jit(fn=None, **kwargs) lists no options (SDK:nki/api/nki/__init__.py); these are the ones kernels pass,
# e.g. experimental_flags in nki-library's qkv kernel. They steer neuronx-cc, so the emulator ignores them.
_JIT_OPTIONS = ("mode", "platform_target", "debug_kernel", "show_compiler_tb", "additional_compile_opt",
                "experimental_flags")
# NKI 0.7's named jit options (nki_versions row "jit-config-objects"): recorded on the kernel (compiler.py)
_JIT_CONFIGS = {"compile_config": CompileConfig, "specialization_config": SpecializationConfig}


@dataclass
class Run:
    """What `run` returns: the kernel's outputs, its trace and its peak SBUF bytes per partition."""

    outputs: Any
    trace: Trace
    sbuf_peak_bytes: int = 0
    written_arguments: tuple[str, ...] = ()     # the arguments (by position or name) the kernel wrote


class Kernel:
    """What `nki.jit` returns. Call it (`kernel(x)`, LNC=1) or index it (`kernel[2](x)`)."""

    def __init__(self, fn: Callable, options: dict[str, Any]) -> None:
        for opt, value in options.items():
            if opt in _JIT_CONFIGS:
                continue
            if opt not in _JIT_OPTIONS:
                known = _JIT_OPTIONS + (tuple(_JIT_CONFIGS) if nki_versions.applies("jit-config-objects") else ())
                raise NkiArgumentError(f"nki.jit: unexpected keyword argument '{opt}' (its options: "
                                       f"{', '.join(known)}) ({kernel_location()})")
            if opt == "platform_target":
                # "Passing platform_target to @nki.jit raises an error in NKI 0.3.0" (SDK:nki/migration/index.rst)
                raise NkiValidationError(
                    f"nki.jit: platform_target={value!r} is not accepted since NKI 0.3.0; set the target with the "
                    f"NEURON_PLATFORM_TARGET_OVERRIDE environment variable instead ({kernel_location()})")
        sig = inspect.signature(fn)
        if any(p.kind is p.KEYWORD_ONLY for p in sig.parameters.values()):
            raise NkiValidationError(
                f"nki.jit: kernel '{fn.__name__}' has keyword-only parameters (a bare '*'); NKI kernels do not "
                f"support them ({_def_location(fn)})")
        self.fn = fn
        self.options = options
        self.compile_config: CompileConfig | None = _jit_config(options, "compile_config")
        self.specialization_config: SpecializationConfig | None = _jit_config(options, "specialization_config")
        self.schedule: schedule.Edges = ()
        functools.update_wrapper(self, fn)

    def with_schedule(self, edges: Any) -> "Kernel":
        """The same kernel with dependency edges between named instructions (emulator/schedule.py)."""
        scheduled = Kernel(self.fn, self.options)
        scheduled.schedule = self.schedule + schedule.parse_edges(self.fn.__name__, edges, kernel_location())
        return scheduled

    def __getitem__(self, grid: Any) -> "Launcher":
        lnc = grid[0] if isinstance(grid, tuple) and len(grid) == 1 else grid
        if not isinstance(lnc, int) or isinstance(lnc, bool) or lnc not in (1, 2):
            raise NkiValidationError(
                f"NCC_EARG001 Unsupported Logical Neuron Core (LNC) configuration: kernel[{grid!r}]; trn2 supports "
                f"LNC 1 or 2 ({kernel_location()})")
        return Launcher(self, lnc)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if torch.compiler.is_dynamo_compiling() and compiled_call.registered():
            return compiled_call.node(self, 0, args, kwargs)   # one node of the captured graph
        return Launcher(self, None)(*args, **kwargs)

    def __eq__(self, other: object) -> bool:   # identity, spelled out: torch.compile takes a kernel as a constant
        return self is other

    __hash__ = object.__hash__


# Set by the trn2 rehearsal (nkisim/trn2_rehearsal.py): launches then go to the stand-in device.
DEVICE_LAUNCH: Callable[["Kernel", int, tuple, dict], Any] | None = None


class Launcher:
    """`kernel[lnc]`; `simulated`: `nki.simulate(...)`, whose call "executes the kernel on CPU" (the nki.simulate
    page) with no compiler or runtime to agree with: on the emulator even beside a device (the trn2 rehearsal),
    whatever NEURON_LOGICAL_NC_CONFIG says."""

    def __init__(self, kernel: Kernel, lnc: int | None, simulated: bool = False) -> None:
        self.kernel = kernel
        self.lnc = lnc                   # None: unbracketed, the LNC the launch takes when it runs
        self.simulated = simulated

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        __tracebackhide__ = True
        if torch.compiler.is_dynamo_compiling() and compiled_call.registered():
            return compiled_call.node(self.kernel, self.lnc or 0, args, kwargs)
        program = cores.running_program()
        if program is not None:   # a kernel called from a kernel is inlined (a sub-kernel)
            _check_nested_config(self.kernel, program.launch.kernel)
            return self.kernel.fn(*args, **kwargs)
        lnc = self.lnc or unbracketed_lnc()
        if DEVICE_LAUNCH is not None and not self.simulated:
            return DEVICE_LAUNCH(self.kernel, lnc, args, kwargs)
        token = SIMULATED.set(self.simulated)
        try:
            outputs = launch(self.kernel, args, kwargs, lnc, dry_run=False).outputs
        finally:
            SIMULATED.reset(token)
        if IN_GRAPH.get():       # an nki_op's kernel: the op's own autograd applies
            return outputs
        return eager_gradient.without_gradient(self.kernel.fn.__name__, (args, kwargs), outputs)


def _jit_config(options: dict[str, Any], option: str) -> Any:
    """The checked `compile_config=` / `specialization_config=` of nki.jit (None when not given)."""
    value = options.get(option)
    if value is None:
        return None
    if not nki_versions.applies("jit-config-objects"):
        raise NkiArgumentError(coverage.not_in_this_version("jit-config-objects", f"nki.jit's {option}="))
    kind = _JIT_CONFIGS[option]
    if not isinstance(value, kind):
        raise NkiArgumentError(f"nki.jit: {option} must be an nki.compiler.{kind.__name__}, got "
                               f"{type(value).__name__} {value!r} ({kernel_location()})")
    return value


def _check_nested_config(nested: Kernel, top: Kernel) -> None:
    """A jit kernel called from a kernel is inlined under the top-level kernel's config. A config of its
    own that differs raises, or warns when the top-level kernel sets
    SpecializationConfig(allow_nested_config_override=True) (nki.compiler.SpecializationConfig page). A
    sub-kernel without a config inherits the top-level one (the pages do not say; nkisim's reading)."""
    differs = [opt for opt in _JIT_CONFIGS if getattr(nested, opt) is not None
               and getattr(nested, opt) != getattr(top, opt)]
    if not differs:
        return
    what = (f"nki.jit: sub-kernel '{nested.fn.__name__}' has "
            f"{', '.join(f'{opt}={getattr(nested, opt)!r}' for opt in differs)}, the top-level kernel "
            f"'{top.fn.__name__}' {', '.join(f'{opt}={getattr(top, opt)!r}' for opt in differs)}")
    if top.specialization_config is not None and top.specialization_config.allow_nested_config_override is True:
        warnings.warn(NkiWarning(f"{what}; it is inlined under the top-level kernel's config "
                                 f"(allow_nested_config_override=True) ({kernel_location()})"), stacklevel=3)
        return
    raise NkiValidationError(
        f"{what}: a sub-kernel is inlined under the top-level kernel's config; give both the same config, or pass "
        f"specialization_config=SpecializationConfig(allow_nested_config_override=True) to '{top.fn.__name__}' to "
        f"inline it with a warning ({nki_versions.JIT_07}) ({kernel_location()})")


def jit(fn: Callable | None = None, **options: Any) -> Any:
    """`@nki.jit` / `@nki.jit(...)`: make a launchable kernel. NKI 0.7's compile_config= and
    specialization_config= (nki.compiler objects) are checked and recorded: their options steer neuronx-cc,
    not results (compiler.py); NKI 0.6 refuses them."""
    if fn is None:
        return lambda f: Kernel(f, options)
    return fn if isinstance(fn, Kernel) else Kernel(fn, options)


def simulate(kernel: Any) -> Callable:
    """`nki.simulate(kernel)` / `nki.simulate(kernel[2])` (a plain function is wrapped): the emulated call, on the
    CPU whatever device the process has (`Launcher`)."""
    if isinstance(kernel, Launcher):
        return Launcher(kernel.kernel, kernel.lnc, simulated=True)
    return Launcher(kernel if isinstance(kernel, Kernel) else Kernel(kernel, {}), None, simulated=True)


def _def_location(fn: Callable) -> str:
    code = fn.__code__
    return f"{os.path.basename(code.co_filename)}:{code.co_firstlineno}"


def _check_target(where: str) -> None:
    target = os.environ.get("NEURON_PLATFORM_TARGET_OVERRIDE", "trn2")
    if target not in TARGETS:
        # A kernel file may set it when imported (the SDK's tensor_addition example selects trn1).
        raise NkiValidationError(
            f"NEURON_PLATFORM_TARGET_OVERRIDE={target} in the environment (set by this process or by a file it "
            f"imported): nkisim emulates trn2 (gen3) only; unset it or set it to trn2 ({where})")


def _warn_float32_storage_not_offered() -> None:
    # The NKI CPU Simulator guide's "Precise Floating-Point Mode": NKI_PRECISE_FP=0 makes AWS's simulator store
    # every low-precision tensor as float32; nkisim stores and rounds them as trn2 does, always.
    if os.environ.get("NKI_PRECISE_FP", "").strip() == "0":
        warnings.warn(NkiWarning(
            "NKI_PRECISE_FP=0 (AWS's simulator: store low-precision tensors as float32) is not offered by nkisim: "
            "bf16, fp16 and fp8 tensors are stored and rounded as on trn2; to tell an algorithm bug from rounding, "
            "run the kernel on float32 inputs"), stacklevel=2)


LNC_ENV = "NEURON_LOGICAL_NC_CONFIG"
# Set by torch_neuronx.nki_op while its op runs: the kernel is then compiled as part of a compute graph,
# whose LNC degree neuronx-cc fixes (trn2 default 2), as in EVRF066's causes.
IN_GRAPH: contextvars.ContextVar[bool] = contextvars.ContextVar("nkisim_in_graph", default=False)
# Set while an nki.simulate call launches (Launcher.simulated).
SIMULATED: contextvars.ContextVar[bool] = contextvars.ContextVar("nkisim_simulated", default=False)
# Set by torch_neuronx.nki_op while its op runs: the torch tensors its kernels wrote in place (checked against the
# op's mutates_args).
OP_WRITES: contextvars.ContextVar[list | None] = contextvars.ContextVar("nkisim_op_writes", default=None)


def unbracketed_lnc() -> int:
    """The LNC of a launch without brackets: 1 under NKI 0.6 ("If no brackets are given the number of
    cores defaults to 1"); under NKI 0.7 NEURON_LOGICAL_NC_CONFIG when set ("It can be specified using
    the NEURON_LOGICAL_NC_CONFIG environment variable or via bracket syntax": LNC overview, 2.33; EVRF066:
    "export NEURON_LOGICAL_NC_CONFIG=2  # Set kernel LNC=2"), else 1."""
    env = os.environ.get(LNC_ENV, "").strip()
    if not nki_versions.applies("lnc-degree-check") or not env:
        return 1
    if env not in ("1", "2"):
        raise NkiValidationError(f"NCC_EARG001 Unsupported Logical Neuron Core (LNC) configuration: {LNC_ENV}={env}; "
                                 f"trn2 supports LNC 1 or 2 ({kernel_location()})")
    return int(env)


def _compiler_lnc() -> int | None:
    """neuronx-cc's LNC degree: `--lnc` in NEURON_CC_FLAGS, else NEURON_LOGICAL_NC_CONFIG, else (in a
    graph) trn2's default 2; None for a launch that no graph compilation fixes."""
    flags = os.environ.get("NEURON_CC_FLAGS", "").replace("=", " ").split()
    if "--lnc" in flags[:-1] and flags[flags.index("--lnc") + 1].isdigit():
        return int(flags[flags.index("--lnc") + 1])
    env = os.environ.get(LNC_ENV, "").strip()
    if env.isdigit():
        return int(env)
    return 2 if IN_GRAPH.get() else None


def compiler_lnc_mismatch(fn: Callable, lnc: int) -> str | None:
    """NKI 0.7's NCC_EVRF066 when neuronx-cc compiles at another LNC than the kernel's launch, else None."""
    compiler = _compiler_lnc()
    if compiler is None or compiler == lnc:
        return None
    return (f"NCC_EVRF066 NKI kernel '{fn.__name__}' is configured with LNC={lnc}, but neuronx-cc is using "
            f"LNC={compiler}: all NKI kernels of a model use the compiler's LNC degree; set {LNC_ENV} to the "
            f"degree you want (it sets both) and launch as kernel(...) or kernel[{compiler}](...) "
            f"({nki_versions.ROWS['lnc-degree-check'].page})")


def _check_lnc_env(fn: Callable, lnc: int) -> None:
    # The runtime and the compiler are the device's. With the real SDK installed (or rehearsed), nkisim only runs
    # beside the device (traces and dry runs for the cost model), so the device's LNC does not bind it; nor does it
    # bind nki.simulate, which neither compiles nor loads the kernel.
    from ..active_backend import device_beside

    if device_beside() or SIMULATED.get():
        return
    if nki_versions.applies("lnc-degree-check"):
        mismatch = compiler_lnc_mismatch(fn, lnc)
        if mismatch:
            raise NkiValidationError(f"{mismatch} ({kernel_location()})")
        return
    env = os.environ.get(LNC_ENV)
    if env is not None and env.strip() != str(lnc):
        raise NkiValidationError(
            f"kernel launched with LNC={lnc} but {LNC_ENV}={env}; the launch degree must equal "
            f"the runtime's LNC ({kernel_location()})")


ARGUMENT = "<argument>"      # Storage.source of a kernel argument


def launch_in_graph(kernel: Kernel, lnc: int, args: tuple, kwargs: dict) -> tuple[Any, tuple[str, ...]]:
    """A launch as one node of a compiled graph (compiled_call): lnc 0 is an unbracketed call, and the compiler's
    LNC applies (IN_GRAPH, as in an nki_op). Returns the outputs and the arguments the kernel wrote (a device
    run, in the trn2 rehearsal, reports none: its fake run before it already has)."""
    token = IN_GRAPH.set(True)
    try:
        lnc = lnc or unbracketed_lnc()
        fake = any(isinstance(v, torch.Tensor) and is_fake(v) for v in tree_leaves((args, kwargs)))
        if DEVICE_LAUNCH is not None and not fake:
            return DEVICE_LAUNCH(kernel, lnc, args, kwargs), ()
        run = launch(kernel, args, kwargs, lnc, dry_run=False)
        return run.outputs, run.written_arguments
    finally:
        IN_GRAPH.reset(token)


compiled_call.install(Kernel, launch_in_graph)


def _held_array(value: Any, label: str) -> tuple[str, str] | None:
    """(where, kind) of the first numpy array or torch tensor inside a dict or dataclass argument."""
    if isinstance(value, dict):
        items = [(f"{label}[{k!r}]", v) for k, v in value.items()]
    elif is_dataclass(value) and not isinstance(value, type):
        items = [(f"{label}.{f.name}", getattr(value, f.name)) for f in fields(value)]
    elif isinstance(value, tuple):
        items = [(f"{label}[{i}]", v) for i, v in enumerate(value)]
    else:
        return None
    for where, v in items:
        if isinstance(v, (np.ndarray, torch.Tensor)):
            return where, type(v).__module__.split(".")[0] + "." + type(v).__name__
        held = _held_array(v, where)
        if held is not None:
            return held
    return None


class _Args:
    """Kernel arguments converted to HBM tensors, and how to convert results back."""

    def __init__(self, launch_: Launch, buffer: Buffer, where: str) -> None:
        self.launch = launch_
        self.buffer = buffer
        self.where = where           # the launching line, named by argument errors
        self.torch_like: torch.Tensor | None = None
        self.fake = False
        self.write_back: list[tuple[Any, Storage]] = []
        self.arguments: list[tuple[str, Storage]] = []
        self.given: dict[str, Any] = {}      # label -> the caller's array or tensor

    def convert(self, value: Any, label: str) -> Any:
        if isinstance(value, list):
            raise NkiValidationError(f"kernel argument {label} is a list; NKI kernels take tuples (NKI 0.3.0: list "
                                     f"kernel arguments are not supported) ({self.where})")
        if isinstance(value, tuple):
            return tuple(self.convert(v, f"{label}[{i}]") for i, v in enumerate(value))
        if isinstance(value, torch.Tensor):
            return self._from_torch(value, label)
        if isinstance(value, np.ndarray):
            return self._storage(value, value, label)
        held = _held_array(value, label)
        if held is not None:
            raise NkiValidationError(
                f"kernel argument {label} holds a {held[1]} at {held[0]}; nkisim makes device tensors of a kernel's "
                f"array arguments and the arrays in tuple arguments only, so the kernel would see a host array: pass "
                f"it as an argument of its own ({self.where})")
        return value  # Python numbers, dtypes, enums...: compile-time constants

    def _from_torch(self, t: torch.Tensor, label: str) -> NkiTensor:
        dt = dtypes.resolve(t.dtype)
        if dt is None:
            raise NkiValidationError(
                f"kernel argument {label}: dtype {t.dtype} is not an NKI dtype ({dtypes.names()}) ({self.where})")
        self.torch_like = t if self.torch_like is None else self.torch_like
        if is_fake(t):
            self.fake = True
            return self._storage(None, np.empty(tuple(t.shape), dt), label)
        if t.device.type != "cpu":
            raise NkiValidationError(
                f"kernel argument {label}: nkisim runs on CPU tensors, got device {t.device} ({self.where})")
        return self._storage(t, dtypes.numpy_from_torch(t.detach()), label)

    def _storage(self, original: Any, arr: np.ndarray, label: str) -> NkiTensor:
        if dtypes.resolve(arr.dtype) is None:
            raise NkiValidationError(
                f"kernel argument {label}: dtype {arr.dtype} is not an NKI dtype ({dtypes.names()}) ({self.where})")
        data = arr if arr.flags.c_contiguous else np.ascontiguousarray(arr)
        st = self.launch.new_storage(self.buffer, data, None, f"arg{label}", ARGUMENT)
        self.arguments.append((label, st))
        self.given[label] = original
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


def is_fake(t: torch.Tensor) -> bool:
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(t, FakeTensor) or t.device.type == "meta"


def launch(kernel: Kernel, args: tuple, kwargs: dict, lnc: int, dry_run: bool) -> Run:
    """Run all programs of one launch; errors come back without emulator frames, and a raw Python
    exception a user mistake causes comes back as the NKI error naming the API and the line."""
    __tracebackhide__ = True
    try:
        with gc_paused():   # a launch builds its trace: many objects that stay alive (speed only)
            return _launch(kernel, args, kwargs, lnc, dry_run, kernel_location())[0]
    except NkiValidationError as err:
        raise err.with_traceback(strip_internal_frames(err.__traceback__)) from None
    except Exception as err:
        nki_err = user_error(err, _nki_api)
        if nki_err is None:
            raise
        raise nki_err.with_traceback(strip_internal_frames(err.__traceback__)) from err


def _nki_api(name: str) -> tuple[str, Callable] | None:
    """("nisa.activation", the function) for a public nki.isa / nki.language function name."""
    for prefix, module in (("nisa", isa), ("nl", language)):
        fn = vars(module).get(name)
        if callable(fn) and not name.startswith("_"):
            return f"{prefix}.{name}", fn
    return None


def _launch(kernel: Kernel, args: tuple, kwargs: dict, lnc: int, dry_run: bool, where: str,
            reverse: bool = False) -> tuple[Run, list[np.ndarray]]:
    """The launch's Run and the final bytes of its outputs and written arguments; the arguments the kernel
    wrote are copied back unless `reverse` (the second run of a read race, program order reversed)."""
    __tracebackhide__ = True    # IPython and pytest show the kernel's frame, not this one
    _check_target(where)
    _warn_float32_storage_not_offered()
    fn = kernel.fn
    _check_lnc_env(fn, lnc)
    reads = check_kernel(fn)
    check_arguments(args + tuple(kwargs.values()), where)
    if not args and not kwargs:
        raise NkiValidationError(f"kernel '{fn.__name__}' called with no arguments; pass its input tensors ({where})")
    try:
        inspect.signature(fn).bind(*args, **kwargs)
    except TypeError as err:
        raise NkiArgumentError(
            f"kernel '{fn.__name__}': {str(err).split('() ', 1)[-1]} (its parameters: "
            f"{', '.join(inspect.signature(fn).parameters)}) ({where})") from None
    the_launch = Launch(fn.__name__, lnc, dry_run)
    the_launch.kernel = kernel
    the_launch.reverse = reverse
    # an LNC=1 argument is in nl.hbm (= nl.private_hbm; the official simulator prints it as hbm), so a kernel's
    # `t.buffer in (nl.hbm, nl.shared_hbm, nl.private_hbm)` holds for it as on hardware
    conv = _Args(the_launch, SHARED_HBM if lnc > 1 else PRIVATE_HBM, where)
    c_args = tuple(conv.convert(a, str(i)) for i, a in enumerate(args))
    c_kwargs = {k: conv.convert(v, k) for k, v in kwargs.items()}
    if conv.fake:
        the_launch.dry_run = the_launch.trace.dry_run = True
    cached = (compile_cache.launching(fn, compile_cache.cache_key(fn, c_args, c_kwargs, lnc), reads) if reads
              else contextlib.nullcontext())
    with cached:
        run, final = _run_programs(fn, the_launch, conv, c_args, c_kwargs)
    if the_launch.read_races and not reverse:
        _decide_read_races(the_launch.read_races, final, lambda: _launch(kernel, args, kwargs, lnc, dry_run, where,
                                                                         reverse=True)[1])
        cores.set_last_trace(run.trace)       # nkisim.last_trace() is this run's, not the other order's
    if not the_launch.dry_run and not reverse:
        conv.finish()
        sink = OP_WRITES.get()
        if sink is not None:
            sink.extend(conv.given[label] for label, st in conv.arguments if st.written)
    schedule.apply_edges(fn.__name__, kernel.schedule, run.trace, where)
    return run, final


def _decide_read_races(races: list[str], final: list[np.ndarray], other_order: Callable[[], list[np.ndarray]]) -> None:
    """A core read shared HBM elements the other core wrote, unsynchronised: on trn2 the read sees the old or the
    new values. The emulator ran program 0 first; run the launch again with the last program first: if the
    outputs and written arguments come out bit-identical the value read did not reach them (a kernel that masks
    a slot the other core is updating, as nki-library's attention_block_tkg does) and the race is a warning;
    otherwise the result depends on which core goes first, an error naming the first such pair."""
    __tracebackhide__ = True
    try:
        with warnings.catch_warnings():       # the other order's own warnings repeat this run's
            warnings.simplefilter("ignore")
            other = other_order()
        same = all(np.array_equal(a, b) for a, b in zip(final, other, strict=True))
    except NkiValidationError:
        same = False            # the other order fails outright: the race decides the kernel's fate
    if not same:
        raise NkiValidationError(races[0])
    for race in races:
        warnings.warn(NkiRaceWarning(f"{race}; the outputs are the same whichever core goes first, so the value "
                                     f"read does not reach them"), stacklevel=2)


def _run_programs(fn: Callable, the_launch: Launch, conv: _Args, c_args: tuple,
                  c_kwargs: dict) -> tuple[Run, list[np.ndarray]]:
    """The programs' Run, and (after a read race, or in the other-order run) the final bytes of the outputs and
    the arguments the kernel wrote."""
    __tracebackhide__ = True
    lnc = the_launch.lnc
    programs = [Program(the_launch, pid) for pid in range(lnc)]
    if lnc == 1:
        with cores.running(programs[0]):
            results = [fn(*c_args, **c_kwargs)]
    else:       # the programs may wait for each other (collectives): they take turns
        the_launch.interleaver = Interleaver(cores.activate)
        results = the_launch.interleaver.run(programs, lambda prog: fn(*c_args, **c_kwargs),
                                             first=lnc - 1 if the_launch.reverse else 0)
        the_launch.settle_write_conflicts()
        divergence = divergent_control_flow([prog.dynamic_trips for prog in programs])
        if divergence is not None:
            warnings.warn(NkiWarning(divergence), stacklevel=2)
    peaks = []
    for pid, prog in enumerate(programs):
        peak, at = prog.sbuf_peak()
        the_launch.trace.sbuf_peak_bytes_per_partition[pid] = peak
        the_launch.trace.sbuf_allocations += [Allocation(pid, sid, live.first, live.last, live.bytes_per_partition,
                                                         live.placed) for sid, live in prog.sbuf.items()]
        peaks.append((peak, at, prog))
        the_launch.trace.psum_banks += tuple((sid, bank) for sid, bank in prog.psum.banks.items() if bank is not None)
        the_launch.trace.loop_fences += tuple((pid, index) for index in sorted(set(prog.loop_fences)))
    if not conv.fake:   # fake (meta) arguments get fresh fake outputs: no placeholder values to fill (speed only)
        for st in the_launch.shared:
            st.materialise()
    cores.set_last_trace(the_launch.trace)
    _check_sbuf_capacity(peaks, the_launch.trace, the_launch.kernel.compile_config)
    for _, _, prog in peaks:
        check_bank_count(prog.id, prog.psum, the_launch.trace.program(prog.id))
    outputs = _outputs(fn, results[0], conv)
    written = tuple(label for label, st in conv.arguments if st.written)
    final = [] if not (the_launch.read_races or the_launch.reverse) else [
        _bytes(st.data) for st in _result_storages(results[0]) + [st for _, st in conv.arguments if st.written]]
    return Run(outputs, the_launch.trace, max(p for p, _, _ in peaks), written), final


def _result_storages(result: Any) -> list[Any]:
    if isinstance(result, (tuple, list)):
        return [st for r in result for st in _result_storages(r)]
    return [result.storage] if isinstance(result, NkiTensor) else []


def _bytes(data: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(data).reshape(-1).view(np.uint8).copy()


def _check_sbuf_capacity(peaks: list[tuple[int, int, Program]], trace: Trace, config: CompileConfig | None) -> None:
    """Over the usable SBUF, the compiler spills (recorded in `trace.spills`, one warning per launch)
    or, where no spill can help, fails (`allocation.spills` raises). With `nki_alloc_fallback=False` it fails:
    the option surfaces the failure of NKI's own allocation "(e.g. an SBUF/PSUM out-of-memory) instead of
    retrying" in neuronx-cc's allocation flow (the nki.compiler.CompileConfig page), which is the one that spills."""
    over = [(peak, at, prog) for peak, at, prog in peaks if peak > SBUF_USABLE_BYTES_PER_PARTITION]
    if over and config is not None and config.nki_alloc_fallback is False:
        peak, at, prog = max(over, key=lambda p: p[0])
        raise NkiValidationError(
            f"SBUF out of memory: program {prog.id} needs {peak} bytes per partition at its peak "
            f"({prog.source_of(at)}), above the usable {SBUF_USABLE_BYTES_PER_PARTITION}, and the kernel's "
            f"CompileConfig(nki_alloc_fallback=False) surfaces the allocation failure instead of falling back to "
            f"neuronx-cc's allocation flow, which would spill (nki.compiler.CompileConfig page) "
            f"(launched at {kernel_location()})")
    plans = {prog.id: (peak, at, allocation.spills(prog.id, list(prog.sbuf.values()), peak, at, prog.source_of))
             for peak, at, prog in peaks if peak > SBUF_USABLE_BYTES_PER_PARTITION}
    if not plans:
        return
    trace.spills = [s for _, _, program_spills in plans.values() for s in program_spills]
    by_id = {prog.id: prog for _, _, prog in peaks}
    text = allocation.warning_text(plans, lambda pid, index: by_id[pid].source_of(index))
    warnings.warn(NkiSpillWarning(f"{text} (launched at {kernel_location()})"), stacklevel=2)


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
            f"({return_location(fn)})")
    if result.buffer is not SHARED_HBM and result.storage.source != ARGUMENT:
        raise NkiValidationError(
            f"kernel '{fn.__name__}' returns {_described(result)}, which is in {result.buffer.name}; kernel "
            f"outputs must be allocated with buffer=nl.shared_hbm ({nki_versions.MIGRATION_06}, 'Output tensors must "
            f"use nl.shared_hbm') ({result.storage.source})")
    return conv.output(result)
