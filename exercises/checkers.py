"""One checker per exercise: `check_<exercise>(learner_answer)`.

Each runs the learner's function or kernel on several small cases (partial tiles, B=1 and B=4,
fp32 and bf16, LNC=2 where it matters), compares with `kernels.reference` and, where the lesson is
about performance, reads the instruction trace. On success it prints one line per case; on failure
it raises `CheckFailed` (an AssertionError) that says which rows or tiles differ, expected vs got,
and a hint. Shapes stay tiny so every checker runs in about a second on the CPU emulator.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import torch
import torch.nn.functional as F

import nkisim
from kernels import reference
from exercises.grading import (
    PMAX, CheckFailed, Mistake, as_float, call, check_rows_once, check_tile_reads, checker, compare,
    compute_instructions, describe, dtype_name, fail, instructions, passed, randn, run_kernel, where,
)

__all__ = [
    "CheckFailed",
    "check_gelu_reference",
    "check_gelu_one_tile",
    "check_gelu_poly_erf",
    "check_gelu_tiles",
    "check_gelu_bwd",
    "check_gelu_autograd",
    "check_gelu_lnc2",
    "check_affine_fold",
    "check_naive_layernorm",
    "check_dge_none",
    "check_loads_first",
    "check_group_size",
    "check_shifted_stats",
    "check_two_op_normalize",
    "check_fold_lnc2",
    "check_folded_linear",
]

FP32 = dict(atol=1e-5, rtol=1e-5)
BF16 = dict(atol=2e-2, rtol=2e-2)
TOL = {torch.float32: FP32, torch.bfloat16: BF16, torch.float64: dict(atol=1e-12, rtol=1e-12)}
EPS = 1e-5


def _gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    return F.gelu(x.double(), approximate="tanh")


def _gelu_mistakes(x: torch.Tensor) -> list[Mistake]:
    """Outputs of the usual wrong GELUs, so the message can name the mistake."""
    x64 = x.double()
    return [
        Mistake(_gelu_tanh(x64), "this is the tanh approximation 0.5x(1+tanh(...)); the exact GELU uses "
                "erf (nl.gelu on the Scalar engine, torch.erf in PyTorch), not nl.gelu_apprx_tanh."),
        Mistake(x64 * torch.sigmoid(1.702 * x64), "this is the sigmoid approximation x*sigmoid(1.702x); "
                "the exact GELU uses erf."),
    ]


def _gelu_inputs(rows: int, cols: int, dtype: torch.dtype, seed: int = 0) -> torch.Tensor:
    """Values over [-6, 6]: both tails and the bend near 0 where the approximations differ."""
    return randn(rows, cols, dtype=dtype, scale=2.5, seed=seed).clamp(-6, 6)


# ---------------------------------------------------------------- GELU track


@checker
def check_gelu_reference(gelu_exact: Callable, gelu_exact_grad: Callable) -> None:
    """Exercise 1: exact GELU and its derivative, elementwise, any shape, dtype kept."""
    cases = []
    for dtype in (torch.float64, torch.float32):
        for shape in ((401,), (3, 5, 7)):
            x = torch.linspace(-6, 6, shape[0], dtype=dtype) if len(shape) == 1 else randn(*shape, dtype=dtype, scale=2.5)
            case = describe(x=x)
            y = call(gelu_exact, x.clone(), case=case)
            compare("gelu_exact(x)", y, reference.gelu_exact(x), case=case, **TOL[dtype],
                    mistakes=_gelu_mistakes(x), inputs=x, dtype=dtype, dtype_of="x's dtype")
            dy = call(gelu_exact_grad, x.clone(), case=case)
            x64 = x.double()
            cdf = 0.5 * (1 + torch.erf(x64 / math.sqrt(2)))
            grad_mistakes = [
                Mistake(cdf, "that is Phi(x) alone: by the product rule, d/dx [x Phi(x)] = Phi(x) + x phi(x)."),
                Mistake(cdf - x64 * torch.exp(-x64 * x64 / 2) / math.sqrt(2 * math.pi),
                        "the sign of the x*phi(x) term: gelu'(x) = Phi(x) + x phi(x)."),
            ]
            compare("gelu_exact_grad(x)", dy, reference.gelu_exact_grad(x, torch.ones_like(x)), case=case,
                    **TOL[dtype], mistakes=grad_mistakes, inputs=x, dtype=dtype, dtype_of="x's dtype")
            cases.append(case)
    passed("1", cases)


def _gelu_case(kernel: Any, x: torch.Tensor, exercise: str, lnc: int = 1, hint: str | None = None) -> Any:
    case = describe(x=x) + (f", LNC={lnc}" if lnc > 1 else "")
    result = run_kernel(kernel, x, lnc=lnc, case=case, hint=hint)
    compare(f"Exercise {exercise}: the kernel's output", result.outputs, reference.gelu_exact(x), case=case,
            **TOL[x.dtype], mistakes=_gelu_mistakes(x), hint=hint, dtype=x.dtype, dtype_of="x's dtype")
    return case, result


def _activations(result: Any, func: str | None = None) -> list:
    return [i for i in instructions(result.trace, "ACTIVATE") if func is None or i.attrs.get("func") == func]


@checker
def check_gelu_one_tile(kernel: Any) -> None:
    """Exercise 2: one tile, DMA in, one nl.gelu activation, DMA out."""
    cases = []
    for rows, cols, dtype in ((128, 32, torch.float32), (5, 8, torch.float32), (128, 16, torch.bfloat16)):
        case, result = _gelu_case(kernel, _gelu_inputs(rows, cols, dtype), "2",
                                  hint="load x into the SBUF tile, one nisa.activation(op=nl.gelu), store into out.")
        acts, dmas = _activations(result), instructions(result.trace, "DMA")
        if len(acts) != 1 or len(dmas) != 2:
            fail("The kernel should be exactly three instructions: DMA in, one ACTIVATE, DMA out.", case,
                 [f"found {len(dmas)} DMA and {len(acts)} ACTIVATE: " + ", ".join(where(i) for i in result.trace)],
                 "one nisa.activation with op=nl.gelu does the whole tile.")
        cases.append(case)
    passed("2", cases)


@checker
def check_gelu_poly_erf(kernel: Any) -> None:
    """Exercise 3: GELU from arithmetic only (no gelu/erf table entry), fp32 accuracy."""
    cases = []
    for rows, cols in ((128, 64), (37, 16)):
        x = _gelu_inputs(rows, cols, torch.float32, seed=rows)
        case = describe(x=x)
        result = run_kernel(kernel, x, case=case)
        table = [i for i in _activations(result) if i.attrs.get("func", "").startswith(("gelu", "erf"))]
        if table:
            fail("The kernel uses the activation table's GELU/erf, which this exercise is about avoiding.", case,
                 [f"{where(i)} is ACTIVATE func={i.attrs['func']}" for i in table],
                 "build erf from the polynomial: abs, reciprocal, Horner steps, exp, multiplies.")
        negative = x < 0
        odd_mistake = reference.gelu_exact(x).double().where(~negative, 0.5 * x.double() * (
            1 + torch.erf(-x.double().abs() / math.sqrt(2))))
        compare("Exercise 3: the kernel's output", result.outputs, reference.gelu_exact(x), case=case, **FP32,
                dtype=x.dtype, dtype_of="x's dtype",
                mistakes=[*_gelu_mistakes(x), Mistake(odd_mistake, "wrong for x < 0 only: A&S 7.1.26 holds for "
                          "u >= 0, so use |x| (gelu = 0.5 x + 0.5 |x| erf(|x|/sqrt 2)).")],
                hint="compare your steps with the formula one at a time; x < 0 needs |x|; t = 1/(1 + p|x|/sqrt2).")
        cases.append(case)
    per_engine: dict[str, int] = {}
    for ins in compute_instructions(result.trace):
        per_engine[ins.engine] = per_engine.get(ins.engine, 0) + 1
    passed("3", cases, "instructions per tile: " + ", ".join(f"{k} {v}" for k, v in sorted(per_engine.items())))


@checker
def check_gelu_tiles(kernel: Any) -> None:
    """Exercise 4: the 128-row tile loop with a partial last tile, one ACTIVATE per tile."""
    cases = []
    hint = "the last tile has R - 128*(n_tiles-1) rows: loop over every tile start and use min(128, R - r0)."
    for rows, cols, dtype in ((300, 16, torch.float32), (128, 8, torch.float32), (1, 8, torch.float32),
                              (200, 16, torch.bfloat16)):
        case, result = _gelu_case(kernel, _gelu_inputs(rows, cols, dtype, seed=rows), "4", hint=hint)
        n_tiles = -(-rows // PMAX)
        acts = _activations(result)
        if len(acts) != n_tiles:
            fail(f"Expected one ACTIVATE per tile ({n_tiles} tiles), found {len(acts)}.", case,
                 [where(i) for i in acts[:6]], "one nisa.activation(op=nl.gelu) on partitions 0:rows of each tile.")
        check_tile_reads(result.trace, ("ACTIVATE",), cols, rows, case)
        cases.append(case)
    passed("4", cases, "one ACTIVATE per tile")


@checker
def check_gelu_bwd(kernel: Any) -> None:
    """Exercise 5: dx = gelu'(x) * grad_out, one ACTIVATE + one TENSOR_TENSOR per tile."""
    cases = []
    for rows, cols, dtype in ((300, 16, torch.float32), (130, 8, torch.bfloat16)):
        x = _gelu_inputs(rows, cols, dtype, seed=1)
        g = randn(rows, cols, dtype=dtype, seed=2)
        case = describe(x=x, grad_out=g)
        result = run_kernel(kernel, x, g, case=case)
        x64, g64 = x.double(), g.double()
        dgelu = reference.gelu_exact_grad(x64, torch.ones_like(x64))
        compare("Exercise 5: dx", result.outputs, reference.gelu_exact_grad(x, g), case=case, **TOL[dtype],
                dtype=dtype, dtype_of="x's dtype",
                mistakes=[
                    Mistake(reference.gelu_exact(x64) * g64, "this is gelu(x) * grad_out: the backward needs the "
                            "derivative, op=nl.gelu_dx."),
                    Mistake(dgelu, "this is gelu'(x) alone: multiply it by the gradient tile (nisa.tensor_tensor, "
                            "op=nl.multiply, data2=g_tile)."),
                    Mistake(g64, "this is grad_out unchanged: the result of the multiply must be in x_tile, which "
                            "is what gets stored."),
                ])
        n_tiles = -(-rows // PMAX)
        counts = (len(_activations(result)), len(instructions(result.trace, "TENSOR_TENSOR")))
        if counts != (n_tiles, n_tiles):
            fail(f"Expected {n_tiles} ACTIVATE and {n_tiles} TENSOR_TENSOR ({n_tiles} tiles), "
                 f"found {counts[0]} and {counts[1]}.", case,
                 [where(i) for i in compute_instructions(result.trace)[:6]],
                 "per tile: one activation(op=nl.gelu_dx), one tensor_tensor(op=nl.multiply).")
        check_tile_reads(result.trace, ("ACTIVATE", "TENSOR_TENSOR"), cols, rows, case)
        cases.append(case)
    passed("5", cases, "one ACTIVATE + one TENSOR_TENSOR per tile")


@checker
def check_gelu_autograd(function: Any) -> None:
    """Exercise 6: a torch.autograd.Function whose forward/backward call the GELU kernels."""
    cases = []
    # On trn2 the Function's kernel calls are device launches: its tensors live on the Neuron device.
    device = "neuron" if nkisim.backend().name == "trn2" else "cpu"
    for shape, dtype in (((2, 3, 16), torch.float32), ((1, 5, 8), torch.float32), ((4, 33, 8), torch.bfloat16)):
        x_cpu = _gelu_inputs(math.prod(shape[:-1]), shape[-1], dtype, seed=3).reshape(shape)
        x = x_cpu.clone().to(device).requires_grad_(True)
        g_cpu = randn(*shape, dtype=dtype, seed=4)
        case = describe(x=x_cpu)
        hint = "the kernels take [R, C]: flatten with as_rows(...) and reshape the result to x.shape."
        y = call(function.apply, x, case=case, hint=hint)
        compare("Exercise 6: forward output", y.cpu(), reference.gelu_exact(x_cpu), case=case, **TOL[dtype],
                tile_rows=None, dtype=dtype, dtype_of="x's dtype")
        call(y.backward, g_cpu.to(device), case=case, hint=hint)
        if x.grad is None:
            fail("x.grad is None after backward.", case, hint="backward must return the gradient w.r.t. x.")
        y64, g64 = reference.gelu_exact(x_cpu).double(), g_cpu.double()
        compare("Exercise 6: x.grad", x.grad.cpu(), reference.gelu_exact_grad(x_cpu, g_cpu), case=case, **TOL[dtype],
                tile_rows=None, dtype=dtype, dtype_of="x's dtype", mistakes=[
                    Mistake(reference.gelu_exact_grad(y64, g64), "this is gelu'(y) * grad: you saved the output y. "
                            "gelu' is a function of the pre-activation: ctx.save_for_backward(x)."),
                    Mistake(g64, "this is grad_out passed through unchanged: call kernels.gelu_bwd(x, grad_out)."),
                ])
        cases.append(case)
    passed("6", cases)


@checker
def check_gelu_lnc2(kernel: Any) -> None:
    """Exercise 7: rows split across programs; each output row stored exactly once."""
    cases = []
    for rows, cols, lnc in ((300, 16, 2), (256, 8, 2), (1, 8, 2), (300, 16, 1)):
        x = _gelu_inputs(rows, cols, torch.float32, seed=rows)
        case, result = _gelu_case(kernel, x, "7", lnc=lnc, hint=(
            "program p owns rows [p*h, min((p+1)*h, R)) with h = ceil(R / n); no row may belong to two programs."))
        check_rows_once(result.trace, cols, rows, lnc, case)
        check_tile_reads(result.trace, ("ACTIVATE",), cols, rows, case)
        cases.append(case)
    passed("7", cases, "every row stored once, by one program")


# ---------------------------------------------------------------- LayerNorm-fold track


@checker
def check_affine_fold(fold: Callable) -> None:
    """Exercise 8: a new Linear with W' = W diag(gamma), c' = W beta + c; the input layer untouched."""
    from torch import nn

    cases = []
    for out_f, in_f, bias, dtype in ((16, 16, True, torch.float64), (40, 24, True, torch.float64),
                                     (12, 20, False, torch.float64), (40, 24, True, torch.float32)):
        torch.manual_seed(out_f + in_f)
        linear = nn.Linear(in_f, out_f, bias=bias, dtype=dtype)
        gamma = randn(in_f, dtype=dtype, seed=1) * 0.5 + 1.0
        beta = randn(in_f, dtype=dtype, seed=2) * 0.3
        z = randn(6, in_f, dtype=dtype, seed=3)
        before = {k: v.clone() for k, v in linear.state_dict().items()}
        case = f"Linear({in_f} -> {out_f}, bias={bias}) {str(dtype).replace('torch.', '')}"
        folded = call(fold, gamma, beta, linear, case=case,
                      hint="W is [out, H] and gamma has H entries: W * gamma scales W's input columns.")
        if not isinstance(folded, nn.Linear) or folded is linear:
            fail("fold_affine must return a new nn.Linear.", case, [f"got {type(folded).__name__}"
                 + (" (the input layer itself)" if folded is linear else "")])
        if folded.weight.dtype != dtype:
            fail(f"fold_affine's layer has dtype {dtype_name(folded.weight.dtype)}, expected {dtype_name(dtype)} "
                 "(the input layer's dtype).", case,
                 hint="nn.Linear(..., dtype=linear.weight.dtype): a new layer is float32 unless told otherwise.")
        if any(not torch.equal(v, linear.state_dict()[k]) for k, v in before.items()):
            fail("fold_affine changed the input layer in place.", case,
                 hint="write W' and c' into the new layer; other modules may still share the original.")
        w, c = linear.weight.detach(), (linear.bias.detach() if bias else torch.zeros(out_f, dtype=dtype))
        with torch.no_grad():
            got = folded(z)
        expected = (z * gamma + beta) @ w.T + c
        tol = TOL[torch.float64] if dtype == torch.float64 else dict(atol=1e-5, rtol=1e-5)
        tol = dict(atol=tol["atol"] * 10, rtol=tol["rtol"] * 10)
        compare("Exercise 8: folded(z) vs linear(z * gamma + beta)", got, expected, case=case, **tol,
                tile_rows=None, dtype=dtype, dtype_of="the layer's dtype", mistakes=[
                    Mistake((z * gamma) @ w.T + c, "the bias is unfolded: beta moves into the bias as W @ beta + c."),
                    Mistake(z @ (w * gamma[:, None] if in_f == out_f else w).T + w @ beta + c,
                            "gamma scales W's input columns (W * gamma broadcasts along rows), not its output rows."),
                    Mistake(z @ w.T + c, "neither gamma nor beta is folded in."),
                ])
        cases.append(case)
    passed("8", cases)


def _fold_inputs(rows: int, hidden: int, branches: int, seed: int = 0, constant_row: int | None = None):
    """a fp32 [R, H] with per-row offsets, b bf16 [B, R, H]; optionally one row of equal values."""
    a = randn(rows, hidden, seed=seed) + randn(rows, 1, seed=seed + 1, scale=3.0)
    b = randn(branches, rows, hidden, dtype=torch.bfloat16, seed=seed + 2, scale=0.5)
    if constant_row is not None:
        a[constant_row] = 2.5
        b[:, constant_row] = 0
    return a, b


def _fold_case(a: torch.Tensor, b: torch.Tensor, lnc: int = 1) -> str:
    return f"B={b.shape[0]}, " + describe(a=a, b=b) + (f", LNC={lnc}" if lnc > 1 else "")


def _check_x_new(exercise: str, x_new: Any, a: torch.Tensor, b: torch.Tensor, case: str) -> None:
    expected, _ = reference.res_layernorm_fold_reference(a, b, EPS)
    partial = [a.double() + b[:k].double().sum(0) for k in range(b.shape[0])]
    compare(f"Exercise {exercise}: x_new", x_new, expected, case=case, atol=1e-6, rtol=1e-6,
            dtype=a.dtype, dtype_of="a's dtype", mistakes=[
        Mistake(p, f"x_new matches a + the first {k} branches: add all B = {b.shape[0]} branches.")
        for k, p in enumerate(partial)])


@checker
def check_naive_layernorm(kernel: Any) -> None:
    """Exercise 9: (x_new, z) of the naive per-tile kernel for B = 1 and 4, incl. a constant row."""
    cases = []
    for rows, hidden, branches in ((128, 32, 1), (256, 16, 4)):
        a, b = _fold_inputs(rows, hidden, branches, constant_row=5)
        case = _fold_case(a, b)
        result = run_kernel(kernel, a, b, EPS, case=case)
        x_new, z = result.outputs
        _check_x_new("9", x_new, a, b, case)
        expected = reference.res_layernorm_fold_reference(a, b, EPS)[1]
        x64 = expected.double()
        s64 = reference.res_layernorm_fold_reference(a, b, EPS)[0].double()
        centred = s64 - s64.mean(1, keepdim=True)
        compare("Exercise 9: z", z, expected, case=case, **BF16, dtype=torch.bfloat16, dtype_of="b's dtype",
                hint="mean = sum/H; var = sum((s - mean)^2)/H; rstd = 1/sqrt(var + eps); z = (s - mean) * rstd.",
                mistakes=[
                    Mistake(centred / (centred.pow(2).sum(1, keepdim=True) / (hidden - 1) + EPS).sqrt(),
                            "that is the unbiased variance (divided by H - 1); LayerNorm divides by H."),
                    Mistake(x64.where(centred.abs().sum(1, keepdim=True) > 0, float("nan")),
                            "rows of equal values (variance 0) come out NaN: add eps before the rsqrt."),
                ])
        if torch.isnan(as_float(z)[5]).any():
            fail("Exercise 9: z is NaN in row 5, whose values are all equal (variance 0).", case,
                 hint="rstd = 1/sqrt(var + eps): without eps, rsqrt(0) is infinite and 0 * inf is NaN.")
        cases.append(case)
    passed("9", cases)


@checker
def check_dge_none(kernel: Any) -> None:
    """Exercise 10: correct x_new, and every DMA in the trace has dge_mode none."""
    cases = []
    for rows, hidden, branches in ((128, 32, 1), (256, 16, 4)):
        a, b = _fold_inputs(rows, hidden, branches)
        case = _fold_case(a, b)
        result = run_kernel(kernel, a, b, case=case)
        _check_x_new("10", result.outputs, a, b, case)
        other = [i for i in instructions(result.trace, "DMA") if i.dma.dge_mode != "none"]
        if other:
            modes = sorted({i.dma.dge_mode for i in other})
            why = {"unknown": "the default (the compiler picks software DGE: descriptors built on GpSimd, "
                              "~0.6-0.75 us each, one after another)",
                   "swdge": "software DGE (descriptors built on GpSimd while the kernel runs)",
                   "hwdge": "hardware DGE (fast alone, but its queue delays neighbouring kernels' loads)"}
            fail(f"{len(other)} of {len(instructions(result.trace, 'DMA'))} DMAs are not dge_mode.none.", case,
                 [f"{where(i)} uses {i.dma.dge_mode}" for i in other[:6]] + [f"{m}: {why.get(m, m)}" for m in modes],
                 "pass dge_mode=nisa.dge_mode.none to every nisa.dma_copy: loads AND stores.")
        cases.append(case)
    passed("10", cases, "every DMA dge_mode.none")


@checker
def check_loads_first(kernel: Any) -> None:
    """Exercise 11: correct x_new; all loads before the first compute; one load per tile and operand."""
    cases = []
    for rows, hidden, branches in ((512, 16, 1), (384, 8, 4)):
        a, b = _fold_inputs(rows, hidden, branches, seed=7)
        case = _fold_case(a, b)
        result = run_kernel(kernel, a, b, case=case)
        compare_hint = ("each tile needs its own slot: with every load issued first, a slot shared by two tiles "
                        "holds the later tile's data when the earlier one is added.")
        expected, _ = reference.res_layernorm_fold_reference(a, b, EPS)
        compare("Exercise 11: x_new", result.outputs, expected, case=case, atol=1e-6, rtol=1e-6, hint=compare_hint,
                dtype=a.dtype, dtype_of="a's dtype")
        stream = list(result.trace)
        loads = [n for n, i in enumerate(stream) if i.dma is not None and i.dma.direction == "hbm->sbuf"]
        first_compute = next(n for n, i in enumerate(stream) if i.opcode != "DMA")
        late = [stream[n] for n in loads if n > first_compute]
        if late:
            fail(f"{len(late)} loads are issued after the first add ({where(stream[first_compute])}).", case,
                 [f"{where(i)} comes after compute started" for i in late[:4]],
                 "two loops: first every tile's loads (into its own slot), then the adds and stores.")
        n_tiles = rows // PMAX
        if len(loads) != n_tiles * (1 + branches):
            fail(f"Expected one load DMA per tile and operand, n_t*(1+B) = {n_tiles * (1 + branches)}, "
                 f"found {len(loads)}.", case, [where(stream[n]) for n in loads[:4]],
                 "one dma_copy per tile for a and per tile for each branch; a whole-tensor DMA only "
                 "signals completion at its very end.")
        cases.append(case)
    passed("11", cases, "all loads first, one per tile and operand")


@checker
def check_group_size(group_size: Callable, groups: Callable) -> None:
    """Exercise 12: G from the SBUF budget (vs kernels.fold_group_size) and the group ranges."""
    from kernels import FOLD_SBUF_BUDGET, fold_group_size, fold_sbuf_bytes_per_tile

    grid = [(n_t, h, br) for h in (384, 768, 1024, 1280, 1664) for br in (1, 2, 3, 4) for n_t in (1, 7, 20, 64, 128)]
    grid += [(5, 16384, 4), (3, 16384, 1), (1000, 64, 1)]
    for n_t, hidden, branches in grid:
        case = f"n_tiles={n_t}, H={hidden}, B={branches}"
        got = call(group_size, n_t, hidden, branches, case=case)
        expected = fold_group_size(n_t, hidden, branches)
        if got != expected:
            per_tile = fold_sbuf_bytes_per_tile(hidden, branches)
            hint = (f"per-tile footprint H*(8+2B) = {per_tile} B, budget // that = {FOLD_SBUF_BUDGET // per_tile}; "
                    "then clamp to [1, n_tiles].")
            if got == 0 or (isinstance(got, int) and got < 1):
                hint = "one tile that does not fit the budget still has to run: G is at least 1 (max(1, ...))."
            elif isinstance(got, int) and got > n_t:
                hint = f"G cannot exceed the number of tiles ({n_t}): min(n_tiles, ...)."
            fail(f"group_size: expected G = {expected}, got {got}.", case, hint=hint)
    cases = [f"group_size on {len(grid)} shapes (ViT widths, B = 1..4, up to 1000 tiles)"]
    for n_t, g in ((10, 3), (9, 3), (1, 4), (128, 20), (5, 1)):
        case = f"groups(n_tiles={n_t}, group={g})"
        got = [list(r) for r in call(groups, n_t, g, case=case)]
        expected = [list(range(g0, min(g0 + g, n_t))) for g0 in range(0, n_t, g)]
        if got != expected:
            covered = sorted(t for r in got for t in r)
            missing = sorted(set(range(n_t)) - set(covered))
            fail("groups: wrong tile ranges.", case, [f"expected {expected}", f"got      {got}"] +
                 ([f"tiles never in a group: {missing}"] if missing else []),
                 "ceil(n_tiles / G) groups; the last one may be shorter.")
    cases.append("groups on 5 cases, incl. a shorter last group")
    passed("12", cases)


def _stats_inputs(hidden: int, seed: int) -> torch.Tensor:
    """Rows with means from -1e4 to 1e4 and spread ~1, plus one constant row (row 3)."""
    s = randn(PMAX, hidden, seed=seed) + torch.linspace(-1e4, 1e4, PMAX, dtype=torch.float64).to(torch.float32)[:, None]
    s[3] = 123.25
    return s


@checker
def check_shifted_stats(kernel: Any) -> None:
    """Exercise 13: -mean and rstd per row, well conditioned; two full-width passes."""
    cases = []
    for hidden in (64, 24):
        s = _stats_inputs(hidden, seed=hidden)
        case = describe(s=s) + ", row means up to +-1e4, row 3 constant"
        result = run_kernel(kernel, s, EPS, case=case)
        neg_mu, rstd = result.outputs
        s64 = s.double()
        mean, var = s64.mean(1, keepdim=True), s64.var(1, unbiased=False, keepdim=True)
        shift = s64[:, 0:1]
        compare("Exercise 13: neg_mu (= -mean)", neg_mu, -mean, case=case, atol=2e-3, rtol=1e-6,
                dtype=s.dtype, dtype_of="s's dtype", mistakes=[
            Mistake(-mean + 2 * shift, "-mean is off by twice the shift: add the shift back with the sign it was "
                    "taken off, neg_mu = acc * (-1/H) + neg_shift."),
            Mistake(-mean - shift, "acc was summed without the shift: activation_reduce(..., bias=neg_shift)."),
        ])
        if not bool(torch.isfinite(as_float(rstd)[3]).all()):
            fail(f"Exercise 13: rstd of row 3 (all values equal, variance 0) is {float(as_float(rstd)[3, 0])}.", case,
                 [f"expected {1 / math.sqrt(EPS):.6g} = 1/sqrt(eps)"], "var = acc2 * (1/H) + eps: add eps before rsqrt.")
        compare("Exercise 13: rstd", rstd, (var + EPS).rsqrt(), case=case, atol=1e-6, rtol=1e-3,
                dtype=s.dtype, dtype_of="s's dtype", mistakes=[
            Mistake((s64.pow(2).mean(1, keepdim=True) + EPS).rsqrt(), "the second pass is not centred: "
                    "activation_reduce(op=nl.square, ..., bias=neg_mu)."),
        ], hint="acc2 = sum((s + neg_mu)^2); var = acc2/H + eps; rstd = rsqrt(var).")
        wide = [i for i in compute_instructions(result.trace) if i.elements_per_partition >= hidden]
        if len(wide) != 2 or instructions(result.trace, "TENSOR_REDUCE"):
            fail(f"The chain makes {len(wide)} full-width passes over the tile; the shifted chain needs 2 "
                 "(the two activation_reduce).", case, [where(i) for i in wide],
                 "the reductions ride the Scalar-engine activations; the other steps touch one column.")
        cases.append(case)
    passed("13", cases, "two full-width passes")


@checker
def check_two_op_normalize(kernel: Any) -> None:
    """Exercise 14: z = (s + neg_mu) * rstd as one bf16-writing tensor_scalar per tile."""
    cases = []
    for rows, hidden in ((128, 32), (256, 16)):
        s = randn(rows, hidden, seed=rows) * 2 + 5
        mean = s.double().mean(1, keepdim=True)
        rstd = (s.double().var(1, unbiased=False, keepdim=True) + EPS).rsqrt()
        neg_mu, rstd32 = (-mean).float(), rstd.float()
        case = describe(s=s, neg_mu=neg_mu, rstd=rstd32)
        result = run_kernel(kernel, s, neg_mu, rstd32, case=case)
        compare("Exercise 14: z", result.outputs, (s.double() - mean) * rstd, case=case, **BF16,
                dtype=torch.bfloat16, dtype_of="the bf16 z the statement asks for", mistakes=[
            Mistake(s.double() * rstd - mean, "the order of the ops: first add neg_mu, then multiply by rstd "
                    "(op0=nl.add, operand0=neg_mu, op1=nl.multiply, operand1=rstd)."),
        ])
        work = compute_instructions(result.trace)
        n_tiles = rows // PMAX
        one_op = [i for i in work if i.opcode == "TENSOR_SCALAR" and i.attrs.get("op1") is not None
                  and i.writes[0].dtype == "bfloat16"]
        if len(work) != n_tiles or len(one_op) != n_tiles:
            fail(f"Expected one compute instruction per tile ({n_tiles} tile(s)): a two-op TENSOR_SCALAR that "
                 f"writes the bf16 z; found {len(work)}.", case,
                 [f"{where(i)}: {i.opcode}, writes {i.writes[0].dtype}" for i in work[:6]],
                 "nisa.tensor_scalar(dst=z, data=s, op0=nl.add, operand0=neg_mu, op1=nl.multiply, operand1=rstd).")
        cases.append(case)
    passed("14", cases, "one two-op tensor_scalar per tile")


@checker
def check_fold_lnc2(kernel: Any) -> None:
    """Exercise 15: R/n rows per program, each row stored once; R % (n*128) != 0 rejected."""
    cases = []
    for rows, hidden, branches, lnc in ((256, 16, 1, 2), (512, 8, 4, 2), (128, 16, 2, 1)):
        a, b = _fold_inputs(rows, hidden, branches, seed=rows)
        case = _fold_case(a, b, lnc)
        result = run_kernel(kernel, a, b, lnc=lnc, case=case, hint=(
            "program p owns rows [p*R/n, (p+1)*R/n); two programs must never store the same rows."))
        _check_x_new("15", result.outputs, a, b, case)
        check_rows_once(result.trace, hidden, rows, lnc, case)
        cases.append(case)
    a, b = _fold_inputs(384, 8, 1)
    case = _fold_case(a, b, 2)
    try:
        nkisim.run(kernel, a, b, lnc=2)
    except NotImplementedError:
        raise
    except Exception as err:
        if not ("384" in str(err) and "256" in str(err)):
            fail("R=384 at LNC=2 is rejected, but the message does not name R and the limit.", case,
                 [f"{type(err).__name__}: {err}"], "e.g. assert R % (n * 128) == 0, f'R={R} is not divisible by LNC*128 = {n*128}'.")
    else:
        fail("R=384 at LNC=2 ran without an error: 384 rows do not split into whole 128-row tiles per core.", case,
             hint="assert R % (n_programs * 128) == 0 with a message naming R and the limit.")
    cases.append(case + ": rejected with a clear error")
    passed("15", cases, "every row stored once, by one program")


@checker
def check_folded_linear(kernel: Any) -> None:
    """Exercise 16: y = z @ weight.T + bias, K tiles accumulated in PSUM, bias on the evacuation."""
    cases = []
    for rows, hidden, n_out in ((200, 300, 160), (128, 128, 64), (37, 260, 130)):
        z = randn(rows, hidden, dtype=torch.bfloat16, seed=rows)
        weight = randn(n_out, hidden, dtype=torch.bfloat16, scale=hidden ** -0.5, seed=hidden)
        bias = randn(n_out, 1, seed=n_out)
        case = describe(z=z, weight=weight, bias=bias)
        result = run_kernel(kernel, z, weight, bias, case=case, hint=(
            "accumulate=True onto a PSUM tile no matmul wrote yet is undefined: the first K tile overwrites "
            "(accumulate=False), the others accumulate."))
        k_sizes = [min(PMAX, hidden - k0) for k0 in range(0, hidden, PMAX)]
        tiles = -(-rows // PMAX) * -(-n_out // PMAX)
        matmuls = [i for i in result.trace if i.isa == "nc_matmul"]
        got_k = sorted(i.attrs["contraction"] for i in matmuls)
        if got_k != sorted(k_sizes * tiles):
            fail("The matmuls' contraction sizes are wrong.", case,
                 [f"expected per output tile the K tiles {k_sizes}, got contractions {sorted(set(got_k))} "
                  f"over {len(matmuls)} matmuls"],
                 "the partial last K tile has kk = H - 128*(k_tiles-1) partitions: slice w_t and z_t with [0:kk].")
        x64, w64, b64 = z.double(), weight.double(), bias.double()
        expected = x64 @ w64.T + b64.T
        last_k = x64[:, (len(k_sizes) - 1) * PMAX:] @ w64[:, (len(k_sizes) - 1) * PMAX:].T + b64.T
        compare("y", result.outputs, expected, atol=2e-2, rtol=1.6e-2, case=case, dtype=z.dtype,
                dtype_of="z's dtype", mistakes=(
            Mistake(x64 @ w64.T, "the bias is missing: pass bias=b_col[0:nn, :] to the evacuating nisa.activation."),
            Mistake(expected + b64.T, "the bias is added twice."),
            Mistake(last_k, "only the last K tile reached y: the matmuls overwrote PSUM instead of accumulating "
                            "(accumulate=kt > 0, or leave accumulate=None)."),
        ) if len(k_sizes) > 1 else (
            Mistake(x64 @ w64.T, "the bias is missing: pass bias=b_col[0:nn, :] to the evacuating nisa.activation."),
        ))
        evacuations = [i for i in result.trace if i.isa == "activation"]
        if len(evacuations) != tiles:
            fail(f"{len(evacuations)} nisa.activation instructions for {tiles} output tiles.", case,
                 hint="one activation per output tile moves PSUM to SBUF and adds the bias on the way.")
        cases.append(case)
    passed("16", cases, "K tiles accumulated in PSUM, bias on the evacuation")
