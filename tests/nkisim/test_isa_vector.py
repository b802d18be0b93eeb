"""Vector-engine instructions of isa_vector.py against numpy references written from the NKI 0.6
API reference pages (pseudo code and numpy equivalents), including their documented edge cases."""
import re
import warnings

import ml_dtypes
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from helpers import rand, run_tiles
from nkisim import NkiValidationError

F32, BF16 = np.float32, ml_dtypes.bfloat16
LINE = r"\(test_isa_vector\.py:\d+\)$"


def fails(body, *arrays, outs, match):
    with pytest.raises(NkiValidationError, match=match) as info:
        run_tiles(body, *arrays, outs=outs)
    assert re.search(LINE, str(info.value)), str(info.value)


# --- scalar_tensor_tensor ------------------------------------------------------------------------
@pytest.mark.parametrize("reverse0, reverse1", [(False, False), (True, False), (False, True), (True, True)])
def test_scalar_tensor_tensor_reverse_flags(reverse0, reverse1):
    a, b = rand((128, 32), 1), rand((128, 32), 2)
    body = lambda x, y, o: nisa.scalar_tensor_tensor(dst=o, data=x, op0=nl.subtract, operand0=0.5, op1=nl.subtract,
                                                     operand1=y, reverse0=reverse0, reverse1=reverse1)
    got = run_tiles(body, a, b, outs=[((128, 32), F32)])
    t = (F32(0.5) - a) if reverse0 else (a - F32(0.5))
    assert np.array_equal(got, (b - t) if reverse1 else (t - b))


def test_scalar_tensor_tensor_column_operand_bf16_output():
    a, b, col = rand((64, 16), 1), rand((64, 16), 2), rand((64, 1), 3)
    body = lambda x, y, s, o: nisa.scalar_tensor_tensor(dst=o, data=x, op0=nl.multiply, operand0=s, op1=nl.add,
                                                        operand1=y)
    got = run_tiles(body, a, b, col, outs=[((64, 16), BF16)])
    assert np.array_equal(got.astype(F32), (a * col + b).astype(BF16).astype(F32))   # one rounding, on write


def test_scalar_tensor_tensor_rejects_bitvec_and_psum_pair():
    a = rand((8, 8))
    fails(lambda x, o: nisa.scalar_tensor_tensor(dst=o, data=x, op0=nl.bitwise_and, operand0=1, op1=nl.add,
                                                 operand1=x), a, outs=[((8, 8), F32)], match="bit-vector")

    def both_psum(x, o):
        p1 = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
        p2 = nl.ndarray((8, 8), dtype=nl.float32, buffer=nl.psum)
        nisa.scalar_tensor_tensor(dst=o, data=p1, op0=nl.add, operand0=1.0, op1=nl.add, operand1=p2)
    fails(both_psum, a, outs=[((8, 8), F32)], match="data and operand1 are both in psum")


# --- tensor_tensor_scan --------------------------------------------------------------------------
def _scan_ref(a, b, init, op0, op1, reverse0=False, reverse1=False):
    out = np.empty_like(a)
    prev = np.broadcast_to(np.asarray(init, F32).reshape(-1), (a.shape[0],)).astype(F32)
    for i in range(a.shape[1]):
        t = op0(prev, a[:, i]) if reverse0 else op0(a[:, i], prev)
        prev = out[:, i] = op1(b[:, i], t) if reverse1 else op1(t, b[:, i])
    return out


def test_tensor_tensor_scan_linear_recurrence_chained_over_two_tiles():
    """The docs' example: a first scan from 0, the second starting at the first one's last column."""
    a, b = rand((128, 64), 1, 0, 1), rand((128, 64), 2, 0, 1)

    def body(x, y, o):
        nisa.tensor_tensor_scan(dst=o[:, 0:32], data0=x[:, 0:32], data1=y[:, 0:32], initial=0.0, op0=nl.multiply,
                                op1=nl.add)
        nisa.tensor_tensor_scan(dst=o[:, 32:64], data0=x[:, 32:64], data1=y[:, 32:64], initial=o[:, 31:32],
                                op0=nl.multiply, op1=nl.add)
    got = run_tiles(body, a, b, outs=[((128, 64), F32)])
    assert np.array_equal(got, _scan_ref(a, b, 0.0, np.multiply, np.add))


def test_tensor_tensor_scan_reverse_operands_with_subtract():
    a, b = rand((4, 16), 1), rand((4, 16), 2)
    body = lambda x, y, o: nisa.tensor_tensor_scan(dst=o, data0=x, data1=y, initial=1.5, op0=nl.subtract,
                                                   op1=nl.subtract, reverse0=True, reverse1=True)
    got = run_tiles(body, a, b, outs=[((4, 16), F32)])
    assert np.array_equal(got, _scan_ref(a, b, 1.5, np.subtract, np.subtract, True, True))


def test_tensor_tensor_scan_rejects_a_wide_initial_tile():
    a = rand((4, 16))
    fails(lambda x, o: nisa.tensor_tensor_scan(dst=o, data0=x, data1=x, initial=x, op0=nl.add, op1=nl.add), a,
          outs=[((4, 16), F32)], match=r"initial must be a \[4, 1\] tile")


# --- tensor_scalar_cumulative and the Vector accumulator -----------------------------------------
def test_tensor_scalar_cumulative_cumsum_then_continue_with_reduce():
    a = rand((8, 16), 4)

    def body(x, o):
        nisa.tensor_scalar_cumulative(dst=o[:, 0:8], src=x[:, 0:8], op0=nl.multiply, op1=nl.add, imm0=2.0)
        nisa.tensor_scalar_cumulative(dst=o[:, 8:16], src=x[:, 8:16], op0=nl.multiply, op1=nl.add, imm0=2.0,
                                      reduce_cmd=nisa.reduce_cmd.reduce)
    got = run_tiles(body, a, outs=[((8, 16), F32)])
    want = np.empty_like(a)
    reg = np.zeros(8, F32)
    for i in range(16):
        reg = want[:, i] = a[:, i] * F32(2) + reg
    assert np.array_equal(got, want)


@pytest.mark.parametrize("op1, ref, start", [(nl.maximum, np.maximum, -np.inf), (nl.minimum, np.minimum, np.inf),
                                             (nl.multiply, np.multiply, 1.0)])
def test_tensor_scalar_cumulative_identities(op1, ref, start):
    a = rand((8, 12), 5, 0.5, 1.5)
    got = run_tiles(lambda x, o: nisa.tensor_scalar_cumulative(dst=o, src=x, op0=nl.add, op1=op1, imm0=0.0), a,
                    outs=[((8, 12), F32)])
    assert np.array_equal(got, ref.accumulate(a, axis=1))


def test_tensor_scalar_cumulative_load_reduce_from_column_and_int32_rejected():
    a, init = rand((8, 4), 6), rand((8, 1), 7)
    got = run_tiles(lambda x, s, o: nisa.tensor_scalar_cumulative(dst=o, src=x, op0=nl.add, op1=nl.add, imm0=0.0,
                                                                   imm1=s, reduce_cmd=nisa.reduce_cmd.load_reduce),
                    a, init, outs=[((8, 4), F32)])
    assert np.array_equal(got, np.add.accumulate(np.concatenate([init, a], axis=1), axis=1)[:, 1:])
    fails(lambda x, o: nisa.tensor_scalar_cumulative(dst=o, src=x, op0=nl.add, op1=nl.add, imm0=0.0), a,
          outs=[((8, 4), np.int32)], match="int32 is not supported|dtype int32 is not supported")


def test_tensor_scalar_reduce_reset_then_reduce_across_tiles_and_negate():
    a = rand((16, 32), 8)

    def body(x, o, r):
        nisa.tensor_scalar_reduce(dst=o[:, 0:16], data=x[:, 0:16], op0=nl.multiply, operand0=3.0, reduce_op=nl.add)
        nisa.tensor_scalar_reduce(dst=o[:, 16:32], data=x[:, 16:32], op0=nl.multiply, operand0=3.0, reduce_op=nl.add,
                                  reduce_res=r, reduce_cmd=nisa.reduce_cmd.reduce, reduce_res_negate=True)
    o, r = run_tiles(body, a, outs=[((16, 32), F32), ((16, 1), F32)])
    y = a * F32(3)
    assert np.array_equal(o, y)
    want = y[:, :16].sum(1, dtype=F32) + y[:, 16:].sum(1, dtype=F32)
    assert np.allclose(r[:, 0], -want, rtol=1e-5, atol=1e-5)   # fp32 sums; the hardware order is unpublished


def test_tensor_scalar_reduce_max_load_reduce_and_rules():
    a = rand((16, 8), 9)
    got = run_tiles(lambda x, o, r: nisa.tensor_scalar_reduce(
        dst=o, data=x, op0=nl.add, operand0=0.0, reduce_op=nl.maximum, reduce_res=r,
        reduce_cmd=nisa.reduce_cmd.load_reduce, reduce_init=2.5), a, outs=[((16, 8), F32), ((16, 1), F32)])[1]
    assert np.array_equal(got[:, 0], np.maximum(a.max(1), F32(2.5)))
    fails(lambda x, o: nisa.tensor_scalar_reduce(dst=o, data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add,
                                                 reverse0=True), a, outs=[((16, 8), F32)],
          match="reverse0=True is not supported yet")
    fails(lambda x, o: nisa.tensor_scalar_reduce(dst=o, data=x, op0=nl.add, operand0=1.0, reduce_op=nl.add,
                                                 reduce_cmd=nisa.reduce_cmd.load_reduce), a, outs=[((16, 8), F32)],
          match="load_reduce needs reduce_init")



def test_reductions_take_nl_max_and_nl_min_as_their_operator():
    """The v2.33.0 tensor_scalar_reduce page: "The reduce_op can be any of nl.add, nl.multiply, nl.max or nl.min";
    the reduction functions name the maximum / minimum ALU op, as nki-library's foreach_norm passes op=nl.max to
    tensor_reduce, tensor_partition_reduce and tensor_tensor. nl.mean is no ALU op."""
    a = rand((16, 8), 3)

    def body(x, row_max, row_min, tsr_max, tsr_dst, col_max, pair_max):
        nisa.tensor_reduce(dst=row_max, op=nl.max, data=x, axis=1, keepdims=True)
        nisa.tensor_reduce(dst=row_min, op=nl.min, data=x, axis=1, keepdims=True)
        nisa.tensor_scalar_reduce(dst=tsr_dst, data=x, op0=nl.multiply, operand0=2.0, reduce_op=nl.max,
                                  reduce_res=tsr_max)
        nisa.tensor_partition_reduce(dst=col_max, op=nl.max, data=x)
        nisa.tensor_tensor(dst=pair_max, data1=row_max, data2=row_min, op=nl.min)
    row_max, row_min, tsr_max, _, col_max, pair_min = run_tiles(
        body, a, outs=[((16, 1), F32), ((16, 1), F32), ((16, 1), F32), ((16, 8), F32), ((1, 8), F32), ((16, 1), F32)])
    assert np.array_equal(row_max[:, 0], a.max(1)) and np.array_equal(row_min[:, 0], a.min(1))
    assert np.array_equal(tsr_max[:, 0], 2 * a.max(1)) and np.array_equal(col_max[0], a.max(0))
    assert np.array_equal(pair_min[:, 0], a.min(1))
    fails(lambda x, o: nisa.tensor_tensor(dst=o, data1=x, data2=x, op=nl.mean), a, outs=[((16, 8), F32)],
          match="op must be an nki.language operator such as nl.add, got function")

# --- select_reduce / range_select ----------------------------------------------------------------
def test_select_reduce_basic_reverse_and_reduction():
    on_true = rand((128, 64), 10)
    pred = np.zeros((128, 64), np.uint8)
    pred[0:64] = 1
    o, r = run_tiles(lambda p, t, o, r: nisa.select_reduce(dst=o, predicate=p, on_true=t, on_false=np.finfo(F32).min,
                                                           reduce_res=r, reduce_cmd=nisa.reduce_cmd.reset_reduce),
                     pred, on_true, outs=[((128, 64), F32), ((128, 1), F32)])
    want = np.where(pred != 0, on_true, np.finfo(F32).min)
    assert np.array_equal(o, want) and np.array_equal(r[:, 0], want.max(1))
    rev = run_tiles(lambda p, t, f, o: nisa.select_reduce(dst=o, predicate=p, on_true=t, on_false=f,
                                                          reverse_pred=True),
                    pred, on_true, rand((128, 1), 11), outs=[((128, 64), F32)])
    assert np.array_equal(rev[:64], np.broadcast_to(rand((128, 1), 11)[:64], (64, 64)))
    assert np.array_equal(rev[64:], on_true[64:])


def test_select_reduce_rejects_float_predicate_and_int32_on_true():
    x = rand((8, 8))
    fails(lambda p, o: nisa.select_reduce(dst=o, predicate=p, on_true=p, on_false=0.0), x, outs=[((8, 8), F32)],
          match="predicate dtype float32 is not supported")
    fails(lambda p, t, o: nisa.select_reduce(dst=o, predicate=p, on_true=t, on_false=0.0),
          np.ones((8, 8), np.uint8), np.ones((8, 8), np.int32), outs=[((8, 8), F32)],
          match="on_true dtype int32 is not supported")


def test_range_select_numpy_equivalent_and_chained_reduce():
    """The page's numpy equivalent, then a second call continuing the max with reduce_cmd.reduce."""
    x = rand((32, 64), 12)
    b0, b1 = np.full((32, 1), 10, F32), np.arange(32, dtype=F32).reshape(32, 1) + 20

    def body(t, lo, hi, o, r):
        nisa.range_select(dst=o[:, 0:32], on_true_tile=t[:, 0:32], comp_op0=nl.greater_equal, comp_op1=nl.less,
                          bound0=lo, bound1=hi, range_start=0)
        nisa.range_select(dst=o[:, 32:64], on_true_tile=t[:, 32:64], comp_op0=nl.greater_equal, comp_op1=nl.less,
                          bound0=lo, bound1=hi, range_start=32, reduce_cmd=nisa.reduce_cmd.reduce, reduce_res=r)
    o, r = run_tiles(body, x, b0, b1, outs=[((32, 64), F32), ((32, 1), F32)])
    j = np.arange(64, dtype=F32)[None, :]
    want = np.where((j >= b0) & (j < b1), x, np.finfo(F32).min)
    assert np.array_equal(o, want) and np.array_equal(r[:, 0], want.max(1))


def test_range_select_fill_becomes_minus_inf_in_bf16():
    """The page's stability note: FP32_MIN rounds to -inf when dst is bf16."""
    x = rand((4, 8))
    o = run_tiles(lambda t, lo, hi, o: nisa.range_select(dst=o, on_true_tile=t, comp_op0=nl.greater_equal,
                                                         comp_op1=nl.less, bound0=lo, bound1=hi),
                  x, np.zeros((4, 1), F32), np.full((4, 1), 4, F32), outs=[((4, 8), BF16)])
    assert np.all(np.isneginf(o[:, 4:].astype(F32)))


def test_range_select_rules():
    x, b = rand((4, 8)), np.zeros((4, 1), F32)
    fails(lambda t, lo, o: nisa.range_select(dst=o, on_true_tile=t, comp_op0=nl.not_equal, comp_op1=nl.less,
                                             bound0=lo, bound1=lo), x, b, outs=[((4, 8), F32)],
          match="comp_op0=nl.not_equal is not supported")
    fails(lambda t, lo, o: nisa.range_select(dst=o, on_true_tile=t, comp_op0=nl.less, comp_op1=nl.less, bound0=lo,
                                             bound1=lo, on_false_value=0.0), x, b, outs=[((4, 8), F32)],
          match="on_false_value must be FP32_MIN")


def test_range_select_accepts_the_decimal_literal_of_fp32_min():
    """-3.4028235e38 is not FP32_MIN as a Python float but is exactly FP32_MIN in fp32 (nki-library writes it so)."""
    assert -3.4028235e38 != float(np.finfo(F32).min)
    x, lo, hi = rand((4, 8)), np.zeros((4, 1), F32), np.full((4, 1), 4, F32)
    o = run_tiles(lambda t, a, b, o: nisa.range_select(dst=o, on_true_tile=t, comp_op0=nl.greater_equal,
                                                       comp_op1=nl.less, bound0=a, bound1=b,
                                                       on_false_value=-3.4028235e38),
                  x, lo, hi, outs=[((4, 8), F32)])
    assert np.array_equal(o[:, :4], x[:, :4]) and np.all(o[:, 4:] == np.finfo(F32).min)


def test_range_select_fill_beyond_fp32_is_the_fp32_min_error_not_a_numpy_warning():
    x, lo = rand((4, 8)), np.zeros((4, 1), F32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fails(lambda t, a, o: nisa.range_select(dst=o, on_true_tile=t, comp_op0=nl.greater_equal, comp_op1=nl.less,
                                                bound0=a, bound1=a, on_false_value=-1e39),
              x, lo, outs=[((4, 8), F32)], match="on_false_value must be FP32_MIN")


# --- tensor_copy_predicated ----------------------------------------------------------------------
def test_tensor_copy_predicated_keeps_unselected_and_scalar_source():
    src, old = rand((16, 8), 13), rand((16, 8), 14)
    pred = (rand((16, 8), 15) > 0).astype(np.uint16)

    def body(s, d0, p, o, o2):
        nisa.tensor_copy(dst=o, src=d0)
        nisa.tensor_copy_predicated(dst=o, src=s, predicate=p)
        nisa.tensor_copy(dst=o2, src=d0)
        nisa.tensor_copy_predicated(dst=o2, src=7.0, predicate=p, reverse_pred=True)
    o, o2 = run_tiles(body, src, old, pred, outs=[((16, 8), F32), ((16, 8), F32)])
    assert np.array_equal(o, np.where(pred != 0, src, old))
    assert np.array_equal(o2, np.where(pred == 0, F32(7), old))


def test_tensor_copy_predicated_on_fresh_dst_keeps_the_uninitialised_sentinel():
    pred = np.zeros((4, 4), np.uint8)
    pred[0] = 1
    o = run_tiles(lambda s, p, o: nisa.tensor_copy_predicated(dst=o, src=s, predicate=p), rand((4, 4)), pred,
                  outs=[((4, 4), F32)])
    assert np.all(np.isfinite(o[0])) and np.all(np.isnan(o[1:]))


def test_tensor_copy_predicated_rules():
    x = rand((4, 4))
    fails(lambda s, p, o: nisa.tensor_copy_predicated(dst=o, src=s, predicate=p), x, np.ones((4, 4), np.int8),
          outs=[((4, 4), F32)], match="predicate dtype int8 is not supported")
    fails(lambda s, p, o: nisa.tensor_copy_predicated(dst=o, src=s, predicate=p), x, np.ones((4, 4), np.uint8),
          outs=[((4, 4), BF16)], match="src dtype float32 != dst dtype bfloat16")


# --- bn_stats / bn_aggr --------------------------------------------------------------------------
def test_bn_stats_then_bn_aggr_over_two_tiles_matches_numpy_mean_var():
    x = rand((32, 1000), 16)

    def body(t, o):
        stats = nl.ndarray((32, 12), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(dst=stats[:, 0:6], data=t[:, 0:500])
        nisa.bn_stats(dst=stats[:, 6:12], data=t[:, 500:1000])
        nisa.bn_aggr(dst=o, data=stats)
    got = run_tiles(body, x, outs=[((32, 2), F32)])
    assert np.allclose(got[:, 0], x.mean(1), rtol=1e-5, atol=1e-6)
    assert np.allclose(got[:, 1], x.var(1), rtol=1e-5)


def test_bn_stats_even_odd_layout_and_limit():
    x = np.arange(10, dtype=F32).reshape(1, 10)
    got = run_tiles(lambda t, o: nisa.bn_stats(dst=o, data=t), x, outs=[((1, 6), F32)])
    even, odd = x[0, 0::2], x[0, 1::2]
    assert np.allclose(got[0], [5, even.mean(), even.var() * 5, 5, odd.mean(), odd.var() * 5])
    fails(lambda t, o: nisa.bn_stats(dst=o, data=t), rand((4, 513)), outs=[((4, 6), F32)],
          match="at most 512")


# --- nc_stream_shuffle ---------------------------------------------------------------------------
def test_nc_stream_shuffle_rotate_in_place_per_quadrant():
    x = rand((128, 16), 17)
    mask = tuple([(i - 1) % 32 for i in range(32)])

    def body(t, o):
        nisa.nc_stream_shuffle(dst=t, src=t, shuffle_mask=list(mask))
        nisa.tensor_copy(dst=o, src=t)
    got = run_tiles(body, x, outs=[((128, 16), F32)])
    want = np.concatenate([x[q * 32:(q + 1) * 32][[(i - 1) % 32 for i in range(32)]] for q in range(4)])
    assert np.array_equal(got, want)


def test_nc_stream_shuffle_broadcast_one_partition_and_keep_value():
    x = rand((1, 8), 18)
    mask = (0,) * 31 + (255,)

    def body(t, o):
        nisa.memset(dst=o, value=0.0)
        nisa.nc_stream_shuffle(dst=o, src=t, shuffle_mask=list(mask))
    got = run_tiles(body, x, outs=[((32, 8), F32)])
    assert np.array_equal(got[:31], np.broadcast_to(x, (31, 8))) and np.all(got[31] == 0)


def test_nc_stream_shuffle_start_partition_rule_and_mask_values():
    x = rand((128, 4))
    fails(lambda t, o: nisa.nc_stream_shuffle(dst=o[16:80], src=t[0:64], shuffle_mask=list(range(32))), x,
          outs=[((128, 4), F32)], match="dst covers 64 partitions from start partition 16; an access of 64 partitions must start at "
                "partition 0 or 64")
    fails(lambda t, o: nisa.nc_stream_shuffle(dst=o, src=t, shuffle_mask=[40] * 32), x, outs=[((128, 4), F32)],
          match=r"shuffle_mask\[0\]=40")
