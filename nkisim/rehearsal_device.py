"""The trn2 rehearsal's `neuron` torch device: what TorchNeuron (torch-neuronx 2.14, Neuron SDK 2.33) adds
to PyTorch, stood in on the CPU (nkisim/trn2_rehearsal.py installs it).

TorchNeuron "registers Trainium as a standard PyTorch device, so a model written in standard PyTorch runs on
it by setting the device to neuron; code written against torch.accelerator needs no change", through the
PrivateUse1 extension (ABOUT_TORCHNEURON). Its eager-mode guide adds "Mixed precision: Use
torch.autocast(device_type="neuron")" (TORCHNEURON_INDEX). Here:
- a tensor on `neuron` is a `NeuronTensor`: it reports device neuron:0 and computes on its CPU `inner`;
  factories (`torch.ones(..., device="neuron")`, `torch.tensor(data, device="neuron")`), `.to("neuron")`
  and copies in both directions work; a CPU tensor (beyond a 0-d scalar) in an op on `neuron` tensors
  is refused as on any device, and so is an ordinal other than 0 (one device per process here);
- `torch.neuron` is the device module (`is_available`, `device_count`, `current_device`, `synchronize`,
  `manual_seed`, `manual_seed_all`, `get_amp_supported_dtype`), the role torch.cuda plays for CUDA
  (TORCH_NEURON_MODULE), and `torch.accelerator.synchronize()` reaches it;
- `torch.autocast(device_type="neuron")` follows PyTorch's documented autocast op policy (AUTOCAST_OPS, the
  CUDA lists): matmuls, linear layers and convolutions run in the autocast dtype (torch's default for a
  PrivateUse1 device, float16, unless `dtype=` says otherwise: no page read gives TorchNeuron's), the
  listed precision-sensitive ops in float32, every other op in its inputs' dtype. TorchNeuron's own op
  lists are not published in a page read here.
Stand-in differences: every operation runs when it is called (synchronize has nothing to wait for), and
random numbers on `neuron` come from the CPU generator, so `torch.neuron.manual_seed` seeds that one.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.utils._pytree import tree_flatten, tree_map

from nkisim import rehearsal_runtime as runtime

NEURON = "neuron"
DOCS = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/torch"
ABOUT_TORCHNEURON = f"{DOCS}/about-pytorch-neuron.html"
TORCHNEURON_INDEX = f"{DOCS}/index.html"
TORCH_NEURON_MODULE = f"{DOCS}/reference/api/torch-neuron-module.html"
AUTOCAST_OPS = "https://docs.pytorch.org/docs/stable/amp.html#autocast-op-reference"

# PyTorch's autocast op reference (AUTOCAST_OPS), CUDA: the ops that run in the lower-precision dtype ...
LOWER_PRECISION_OPS = ("addbmm", "addmm", "addmv", "addr", "baddbmm", "bmm", "chain_matmul", "linalg_multi_dot",
                       "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
                       "_convolution", "convolution", "conv_tbc", "linear", "matmul", "mm", "mv", "prelu",
                       "gru_cell", "lstm_cell", "rnn_tanh_cell", "rnn_relu_cell")
# ... and those that run in float32 (the reference's "CUDA Ops that can autocast to float32")
FLOAT32_OPS = ("acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p", "reciprocal",
               "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "native_layer_norm", "group_norm", "norm",
               "nuclear_norm", "frobenius_norm", "cosine_similarity", "poisson_nll_loss", "cosine_embedding_loss",
               "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div", "l1_loss", "smooth_l1_loss", "huber_loss",
               "mse_loss", "margin_ranking_loss", "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss",
               "multi_margin_loss", "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm",
               "logsumexp", "softmax", "log_softmax", "_softmax", "_log_softmax", "cumprod", "cumsum", "prod", "sum",
               "cross_entropy_loss")


class NeuronTensor(torch.Tensor):
    """A tensor on the rehearsal's `neuron` device: reports device neuron:0, computes on its CPU `inner`."""

    inner: torch.Tensor

    @staticmethod
    def __new__(cls, inner: torch.Tensor) -> "NeuronTensor":
        return torch.Tensor._make_wrapper_subclass(
            cls, inner.shape, strides=inner.stride(), storage_offset=inner.storage_offset(), dtype=inner.dtype,
            device=torch.device(NEURON, 0), requires_grad=inner.requires_grad)

    def __init__(self, inner: torch.Tensor) -> None:
        runtime.start()     # the process's first tensor on the device starts its runtime
        self.inner = inner

    def __repr__(self) -> str:
        return f"{self.inner!r} (on neuron:0, trn2 rehearsal)"

    def tolist(self) -> Any:
        """As on any device: the values, copied to the host."""
        return self.inner.tolist()

    def numpy(self, *, force: bool = False) -> Any:
        raise TypeError("can't convert neuron:0 device type tensor to numpy. Use Tensor.cpu() to copy the tensor to "
                        "host memory first. [trn2 rehearsal]")

    def __tensor_flatten__(self) -> tuple[list[str], None]:
        return ["inner"], None

    @staticmethod
    def __tensor_unflatten__(inner_tensors: dict, meta: Any, outer_size: Any, outer_stride: Any) -> "NeuronTensor":
        return NeuronTensor(inner_tensors["inner"])

    @classmethod
    def __torch_dispatch__(cls, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        custom = _custom_op(func)
        if custom is not None and not tracing(args, kwargs):   # eager: the op's wrapper sees device tensors
            return custom(*args, **kwargs)
        if func not in _CROSS_DEVICE:
            _same_device(func, args, kwargs)
        device = kwargs.get("device")
        to_cpu = func is torch.ops.aten._to_copy.default and device is not None and torch.device(device).type == "cpu"
        if device is not None and torch.device(device).type == NEURON:
            _check_ordinal(device)
            kwargs = dict(kwargs, device=torch.device("cpu"))
        out = func(*tree_map(inner, args), **tree_map(inner, kwargs))
        return out if to_cpu else tree_map(wrap, out)


_CROSS_DEVICE = (torch.ops.aten._to_copy.default, torch.ops.aten.copy_.default)


def _same_device(func: Any, args: tuple, kwargs: dict) -> None:
    """As on a real device: no CPU tensor (beyond a 0-d scalar) in an op on `neuron` tensors."""
    flat = [*args, *kwargs.values()]
    for value in flat:
        if isinstance(value, (list, tuple)):
            flat.extend(value)
        elif isinstance(value, torch.Tensor) and not isinstance(value, NeuronTensor) and value.dim() > 0:
            raise RuntimeError(f"Expected all tensors to be on the same device, but found at least two devices, "
                               f"neuron:0 and {value.device}! (in {func}) [trn2 rehearsal]")


def tracing(args: tuple, kwargs: dict) -> bool:
    """True under torch.compile's tracing: the tensors inside are fake or functional, not data (a
    compiled graph runs on the inner CPU tensors, so its kernel ops run on the emulator)."""
    tensors = [inner(v) for v in tree_flatten((args, kwargs))[0] if isinstance(v, torch.Tensor)]   # lists too
    return any(type(t) is not torch.Tensor for t in tensors)


def inner(value: Any) -> Any:
    """A `neuron` tensor's CPU data; anything else as it is."""
    return value.inner if isinstance(value, NeuronTensor) else value


def wrap(value: Any) -> Any:
    """A CPU tensor as a `neuron` tensor; anything else as it is."""
    if isinstance(value, torch.Tensor) and not isinstance(value, NeuronTensor):
        return NeuronTensor(value)
    return value


def _custom_op(func: Any) -> Any:
    """The Python implementation of a torch.library custom op (an nki_op), or None for built-in ops."""
    from torch._library.custom_ops import OPDEFS

    name = getattr(getattr(func, "_schema", None), "name", "")
    opdef = OPDEFS.get(name) if "::" in name and not name.startswith(("aten::", "prim::")) else None
    return None if opdef is None else opdef._init_fn


# ---- torch.neuron --------------------------------------------------------------------------
class NeuronModule:
    """`torch.neuron` (TORCH_NEURON_MODULE: it "plays the role that torch.cuda plays for CUDA devices")."""

    def is_initialized(self) -> bool:
        return True

    def is_available(self) -> bool:
        return True

    def device_count(self) -> int:
        return 1

    def current_device(self) -> int:
        return 0

    def _is_in_bad_fork(self) -> bool:
        return False

    def synchronize(self, device: Any = None) -> None:
        """Wait for the device's work: the stand-in runs each operation when it is called."""
        _check_ordinal(device)

    def manual_seed(self, seed: int) -> None:
        torch.default_generator.manual_seed(seed)   # the stand-in draws `neuron` random numbers on the CPU

    manual_seed_all = manual_seed

    def get_amp_supported_dtype(self) -> list[torch.dtype]:
        return [torch.bfloat16, torch.float16]


def _check_ordinal(device: Any) -> None:
    """One `neuron` device per process here: an ordinal past it is refused, as PyTorch refuses on other devices."""
    if device is None or isinstance(device, str) and ":" not in device:
        return
    index = device if isinstance(device, int) else torch.device(device).index
    if index not in (None, 0):
        raise RuntimeError(f"neuron:{index}: invalid device ordinal; this process has 1 neuron device (neuron:0) "
                           "[trn2 rehearsal]")


def _synchronize_accelerator(original: Callable[..., None]) -> Callable[..., None]:
    """torch.accelerator.synchronize, which reaches torch.neuron.synchronize (a Python-registered PrivateUse1
    device cannot answer torch's C++ synchronize)."""
    def synchronize(device: Any = None, /) -> None:
        if torch.accelerator.current_accelerator().type == NEURON:
            return torch.neuron.synchronize(device)
        return original(device)

    synchronize.__doc__ = original.__doc__
    return synchronize


# ---- registration -----------------------------------------------------------------------------
_LIBRARIES: list = []   # keeps the registrations alive


def register() -> None:
    """The `neuron` device as TorchNeuron adds it (once per process)."""
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    if torch._C._get_privateuse1_backend_name() == NEURON:
        return
    _setup_privateuseone_for_python_backend(rename=NEURON, backend_module=NeuronModule())
    torch.accelerator.synchronize = _synchronize_accelerator(torch.accelerator.synchronize)
    aten = torch.library.Library("aten", "IMPL")
    aten.impl("empty.memory_format", _empty, "PrivateUse1")       # factories on device="neuron"
    aten.impl("empty_strided", _empty_strided, "PrivateUse1")
    aten.impl("_copy_from", _copy_from, "PrivateUse1")            # torch.tensor(data, device="neuron")
    every_op = torch.library.Library("_", "IMPL")
    every_op.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")   # an op autocast leaves alone
    for names, dtype in ((LOWER_PRECISION_OPS, None), (FLOAT32_OPS, torch.float32)):
        for name in names:
            for overload in _overloads(name):
                aten.impl(overload, _autocast_kernel(getattr(torch.ops.aten, name), overload, dtype),
                          "AutocastPrivateUse1", with_keyset=True)
    _LIBRARIES.extend((aten, every_op))


def _overloads(name: str) -> list[str]:
    """The functional overloads of aten::name ("name" or "name.overload"), none writing an out= tensor."""
    packet = getattr(torch.ops.aten, name, None)
    if packet is None:
        return []
    out = []
    for overload in packet.overloads():
        schema = getattr(packet, overload)._schema
        if not any(a.is_out for a in schema.arguments) and not schema.name.endswith("_"):
            out.append(name if overload == "default" else f"{name}.{overload}")
    return out


def _autocast_kernel(packet: Any, overload: str, dtype: torch.dtype | None) -> Callable[..., Any]:
    """An AutocastPrivateUse1 kernel: floating `neuron` tensors cast to `dtype` (None: the autocast dtype), then
    the op below autocast."""
    op = getattr(packet, overload.partition(".")[2] or "default")
    below = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)

    def kernel(_keyset: Any, *args: Any, **kwargs: Any) -> Any:
        to = dtype or torch.get_autocast_dtype(NEURON)

        def cast(value: Any) -> Any:
            eligible = isinstance(value, torch.Tensor) and value.is_floating_point() and value.device.type == NEURON
            return value.to(to) if eligible and value.dtype != torch.float64 else value

        with torch._C._ExcludeDispatchKeyGuard(below):
            return op(*tree_map(cast, args), **tree_map(cast, kwargs))

    return kernel


def _empty(size: Any, dtype: Any = None, layout: Any = None, device: Any = None, pin_memory: Any = None,
           memory_format: Any = None) -> NeuronTensor:
    _check_ordinal(device)
    return NeuronTensor(torch.empty(size, dtype=dtype, memory_format=memory_format))


def _empty_strided(size: Any, stride: Any, dtype: Any = None, layout: Any = None, device: Any = None,
                   pin_memory: Any = None) -> NeuronTensor:
    _check_ordinal(device)
    return NeuronTensor(torch.empty_strided(size, stride, dtype=dtype))


def _copy_from(src: torch.Tensor, dst: torch.Tensor, non_blocking: bool = False) -> torch.Tensor:
    """A copy between the host and the device that torch makes below the tensor subclass (torch.tensor(data,
    device=...), Tensor.new_tensor)."""
    inner(dst).copy_(inner(src))
    return dst
