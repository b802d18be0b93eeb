"""Known-wrong answers per exercise (GPU MODE style): each is the source's solution with one
plausible mistake, and the regular expression the checker's message must match."""
from __future__ import annotations

from exercise_loader import Mutant

MUTANTS: dict[str, list[Mutant]] = {
    "01": [
        Mutant("tanh approximation", "return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))",
               "return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))",
               r"tanh approximation"),
        Mutant("derivative without x*phi(x)", "return cdf + x * pdf", "return cdf", r"Phi\(x\) alone"),
        Mutant("derivative with the wrong sign", "return cdf + x * pdf", "return cdf - x * pdf", r"sign"),
    ],
    "02": [
        Mutant("tanh table entry", "op=nl.gelu, data=tile", "op=nl.gelu_apprx_tanh, data=tile", r"tanh"),
        Mutant("no store", '    nisa.dma_copy(dst=out, src=tile, name="store")\n', "", r"never written"),
        Mutant("an extra instruction", '    nisa.activation(dst=tile, op=nl.gelu',
               '    nisa.activation(dst=tile, op=nl.copy, data=tile)\n    nisa.activation(dst=tile, op=nl.gelu',
               r"exactly three instructions"),
        Mutant("float32 output for bf16 x", "out = nl.ndarray((rows, cols), dtype=x.dtype,",
               "out = nl.ndarray((rows, cols), dtype=nl.float32,", r"dtype float32, expected bfloat16 \(x's dtype\)"),
    ],
    "03": [
        Mutant("x instead of |x|", 'op=nl.abs, data=xt', 'op=nl.copy, data=xt', r"x < 0"),
        Mutant("table shortcut", 'operand0=0.5, name="half")\n',
               'operand0=0.5, name="half")\n    nisa.activation(dst=y, op=nl.gelu, data=xt)\n', r"activation table"),
        Mutant("erf = 1 + poly*gauss", 'operand0=-1.0, op1=nl.add, operand1=1.0, name="erf"',
               'operand0=1.0, op1=nl.add, operand1=1.0, name="erf"', r"output is wrong"),
    ],
    "04": [
        Mutant("partial last tile dropped", "range(0, rows_total, pmax)",
               "range(0, rows_total - rows_total % pmax, pmax)", r"partial last tile.*\n.*never written"),
        Mutant("full 128 rows in the last tile", "rows = min(pmax, rows_total - r0)", "rows = pmax",
               r"last tile has R - 128"),
        Mutant("tanh table entry", "op=nl.gelu,", "op=nl.gelu_apprx_tanh,", r"tanh approximation"),
        Mutant("activation over all 128 partitions of the partial tile",
               "nisa.activation(dst=tile[0:rows], op=nl.gelu, data=tile[0:rows],",
               "nisa.activation(dst=tile, op=nl.gelu, data=tile,",
               r"reads 128 partitions of a tile with 44 valid rows.*tile 2.*never loaded"),
    ],
    "05": [
        Mutant("forward table entry", "op=nl.gelu_dx", "op=nl.gelu", r"gelu\(x\) \* grad_out.*gelu_dx"),
        Mutant("no multiply", '        nisa.tensor_tensor(dst=x_tile[0:rows], data1=x_tile[0:rows], data2=g_tile[0:rows], '
               'op=nl.multiply,\n                           name="mul_grad")\n', "", r"gelu'\(x\) alone"),
        Mutant("derivative over all 128 partitions of the partial tile",
               "nisa.activation(dst=x_tile[0:rows], op=nl.gelu_dx, data=x_tile[0:rows],",
               "nisa.activation(dst=x_tile, op=nl.gelu_dx, data=x_tile,",
               r"reads 128 partitions of a tile with 44 valid rows.*tile 2"),
    ],
    "06": [
        Mutant("saves the output", "ctx.save_for_backward(x)", "ctx.save_for_backward(y)", r"saved the output"),
        Mutant("gradient passed through", "return kernels.gelu_bwd(as_rows(x), as_rows(grad_out)).reshape(x.shape)",
               "return grad_out", r"unchanged"),
        Mutant("no flattening", "kernels.gelu_bwd(as_rows(x), as_rows(grad_out))", "kernels.gelu_bwd(x, grad_out)",
               r"take \[R, C\]"),
    ],
    "07": [
        Mutant("overlapping shards", "first_row = nl.program_id(0) * per_program", "first_row = 0",
               r"already wrote|overlapping|wrong in \d+ of \d+ rows"),
        Mutant("all rows on program 0", "per_program = -(-rows_total // nl.num_programs(0))",
               "per_program = rows_total", r"Program 1 stores no rows"),
        Mutant("off by one row", "first_row = nl.program_id(0) * per_program",
               "first_row = nl.program_id(0) * (per_program + 1)", r"never written"),
    ],
    "08": [
        Mutant("unfolded bias", "folded.bias.copy_(weight @ beta + bias)", "folded.bias.copy_(bias)",
               r"bias is unfolded"),
        Mutant("gamma scales rows", "folded.weight.copy_(weight * gamma)", "folded.weight.copy_(weight * gamma[:, None])",
               r"input columns"),
        Mutant("modifies the input layer", "folded.weight.copy_(weight * gamma)", "folded.weight.copy_(weight.mul_(gamma))",
               r"in place"),
        Mutant("new layer in the default dtype", "bias=True, dtype=linear.weight.dtype)", "bias=True)",
               r"dtype float32, expected float64 \(the input layer's dtype\)"),
    ],
    "09": [
        Mutant("forgot eps", "op1=nl.add, operand1=eps,\n", "op1=nl.add, operand1=0.0,\n", r"add eps"),
        Mutant("unbiased variance", "operand0=1.0 / hidden, op1=nl.add", "operand0=1.0 / (hidden - 1), op1=nl.add",
               r"unbiased variance"),
    ],
    "10": [
        Mutant("store left in default mode", 'src=s, dge_mode=nisa.dge_mode.none, name="store_x"',
               'src=s, name="store_x"', r"'store_x'.*uses unknown"),
        Mutant("hardware DGE on the loads", "src=a[r0:r0 + pmax, :], dge_mode=nisa.dge_mode.none",
               "src=a[r0:r0 + pmax, :], dge_mode=nisa.dge_mode.hwdge", r"hwdge.*neighbouring kernels"),
    ],
    "11": [
        Mutant("two slots reused (ring buffer)", "[:, t, :]", "[:, t % 2, :]", r"own slot", count=5),
        Mutant("loads interleaved with compute",
               "    for t in range(n_tiles):  # then adds and stores, in tile order\n        r0 = t * pmax\n",
               "", r"issued after the first add"),
    ],
    "12": [
        Mutant("branches left out of the footprint", "per_tile = hidden * (8 + 2 * branches)", "per_tile = hidden * 8",
               r"H\*\(8\+2B\)"),
        Mutant("G can be 0", "return max(1, min(n_tiles, budget // per_tile))",
               "return min(n_tiles, budget // per_tile)", r"at least 1"),
        Mutant("G not capped at n_tiles", "return max(1, min(n_tiles, budget // per_tile))",
               "return max(1, budget // per_tile)", r"cannot exceed"),
        Mutant("last group dropped", "for g0 in range(0, n_tiles, group)]",
               "for g0 in range(0, n_tiles - group + 1, group)]", r"never in a group"),
    ],
    "13": [
        Mutant("wrong shift sign", "op1=nl.add,\n                       operand1=neg_shift",
               "op1=nl.subtract,\n                       operand1=neg_shift", r"twice the shift"),
        Mutant("forgot eps", "op1=nl.add, operand1=eps,", "op1=nl.add, operand1=0.0,", r"add eps"),
        Mutant("unshifted first pass", "reduce_res=acc, bias=neg_shift,", "reduce_res=acc,", r"without the shift"),
        Mutant("uncentred second pass", "reduce_res=acc2, bias=neg_mu,", "reduce_res=acc2,", r"not centred"),
    ],
    "14": [
        Mutant("ops in the wrong order", "op0=nl.add, operand0=neg_mu, op1=nl.multiply, operand1=rstd",
               "op0=nl.multiply, operand0=rstd, op1=nl.add, operand1=neg_mu", r"order of the ops"),
        Mutant("two instructions and an fp32 temporary",
               "        nisa.tensor_scalar(dst=z, data=s, op0=nl.add, operand0=neg_mu, op1=nl.multiply, operand1=rstd,\n",
               "        tmp = nl.ndarray((pmax, hidden), dtype=nl.float32, buffer=nl.sbuf)\n"
               "        nisa.tensor_scalar(dst=tmp, data=s, op0=nl.add, operand0=neg_mu)\n"
               "        nisa.tensor_scalar(dst=z, data=tmp, op0=nl.multiply, operand0=rstd,\n",
               r"one compute instruction per tile"),
    ],
    "15": [
        Mutant("overlapping shards", "first_row = nl.program_id(0) * rows_per_program", "first_row = 0",
               r"already wrote|overlapping|wrong in \d+ of \d+ rows"),
        Mutant("no divisibility check", "assert rows_total % (n_programs * pmax) == 0,",
               "assert True,", r"ran without an error"),
        Mutant("error without the limit", 'f"R={rows_total} is not divisible by LNC*128 = {n_programs * pmax}")',
               '"bad number of rows")', r"does not name R"),
    ],
    "16": [
        Mutant("PSUM overwritten per K tile", "accumulate=kt > 0, name=\"matmul\"", "accumulate=False, name=\"matmul\"",
               r"only the last K tile"),
        Mutant("bias not added", "data=acc[0:nn, 0:rr], bias=b_col[0:nn, :],", "data=acc[0:nn, 0:rr],",
               r"bias is missing"),
        Mutant("partial last K tile read as 128 partitions", "                kk = min(pmax, hidden - kt * pmax)\n",
               "                kk = pmax\n", r"partial last K tile|contraction"),
        Mutant("every matmul accumulates", "accumulate=kt > 0, name=\"matmul\"", "accumulate=True, name=\"matmul\"",
               r"accumulate"),
    ],
}
