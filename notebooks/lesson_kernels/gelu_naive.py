"""Lesson 3: exact GELU with erf spelled out in arithmetic, the way a compiler without a GELU
table entry has to do it. Correct to fp32 rounding, and slow: 18 instructions per 128-row tile.

erf comes from Abramowitz & Stegun 7.1.26 (|error| <= 1.5e-7 for u >= 0):
    erfc(u) ~= t * (a1 + t*(a2 + t*(a3 + t*(a4 + t*a5)))) * exp(-u^2),   t = 1 / (1 + p*u).
With u = |x|/sqrt(2) and q = erfc(u), both signs of x collapse into one formula:
    gelu(x) = x * Phi(x) = 0.5 * (x + |x| - |x| * q).
"""
import math

import nki
import nki.isa as nisa
import nki.language as nl

AS_P = 0.3275911
AS_A = (0.254829592, -0.284496736, 1.421413741, -1.453152027, 1.061405429)  # a1 .. a5


@nki.jit
def gelu_naive_erf(x):
    """y = x * Phi(x) for x [R, C] in HBM (fp32 or bf16), tiled by 128 rows, all math in fp32."""
    rows_total, cols = x.shape
    out = nl.ndarray((rows_total, cols), dtype=x.dtype, buffer=nl.shared_hbm)
    pmax = nl.tile_size.pmax
    a1, a2, a3, a4, a5 = AS_A
    for r0 in range(0, rows_total, pmax):
        rows = min(pmax, rows_total - r0)
        xt = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
        ax = nl.ndarray((pmax, cols), dtype=nl.float32, buffer=nl.sbuf)    # |x|, later the result sum
        t = nl.ndarray((pmax, cols), dtype=nl.float32, buffer=nl.sbuf)     # 1 / (1 + p*u)
        poly = nl.ndarray((pmax, cols), dtype=nl.float32, buffer=nl.sbuf)  # Horner sum, then q, then |x|*q
        gauss = nl.ndarray((pmax, cols), dtype=nl.float32, buffer=nl.sbuf) # exp(-x^2 / 2)
        y = nl.ndarray((pmax, cols), dtype=x.dtype, buffer=nl.sbuf)
        v = slice(0, rows)  # the valid partitions of this tile (the last tile may be partial)

        nisa.dma_copy(dst=xt[v], src=x[r0:r0 + rows], name="load_x")
        nisa.activation(dst=ax[v], op=nl.abs, data=xt[v], name="abs")
        # t = 1 / (1 + p * |x| / sqrt(2)): one two-op tensor_scalar, then the reciprocal
        nisa.tensor_scalar(dst=t[v], data=ax[v], op0=nl.multiply, operand0=AS_P / math.sqrt(2.0),
                           op1=nl.add, operand1=1.0, name="t_denominator")
        nisa.reciprocal(dst=t[v], data=t[v], name="t")
        # Horner: poly = t*(a1 + t*(a2 + t*(a3 + t*(a4 + t*a5))))
        nisa.tensor_scalar(dst=poly[v], data=t[v], op0=nl.multiply, operand0=a5, op1=nl.add,
                           operand1=a4, name="horner")
        for coeff in (a3, a2, a1):
            nisa.tensor_tensor(dst=poly[v], data1=poly[v], data2=t[v], op=nl.multiply, name="horner")
            nisa.tensor_scalar(dst=poly[v], data=poly[v], op0=nl.add, operand0=coeff, name="horner")
        nisa.tensor_tensor(dst=poly[v], data1=poly[v], data2=t[v], op=nl.multiply, name="horner")
        # exp(-u^2) = exp(-x^2 / 2) on the Scalar engine (scale is free)
        nisa.activation(dst=gauss[v], op=nl.square, data=xt[v], name="x_squared")
        nisa.activation(dst=gauss[v], op=nl.exp, data=gauss[v], scale=-0.5, name="gauss")
        # q = erfc(u); gelu = 0.5 * (x + |x| - |x| * q)
        nisa.tensor_tensor(dst=poly[v], data1=poly[v], data2=gauss[v], op=nl.multiply, name="erfc")
        nisa.tensor_tensor(dst=poly[v], data1=poly[v], data2=ax[v], op=nl.multiply, name="abs_x_erfc")
        nisa.tensor_tensor(dst=ax[v], data1=ax[v], data2=poly[v], op=nl.subtract, name="combine")
        nisa.tensor_tensor(dst=ax[v], data1=ax[v], data2=xt[v], op=nl.add, name="combine")
        nisa.tensor_scalar(dst=y[v], data=ax[v], op0=nl.multiply, operand0=0.5, name="half")
        nisa.dma_copy(dst=out[r0:r0 + rows], src=y[v], name="store")
    return out
