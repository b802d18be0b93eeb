"""What the Neuron SDK 2.33 (NKI 0.7) reference pages of nki.isa.activation, activate2,
tensor_partition_reduce, memset, tensor_scalar_reduce, bn_aggr, scalar_tensor_tensor, reciprocal,
tensor_copy_predicated, max8 and nki.language.mean add or change, checked under NKI 0.7, and the
NKI 0.6 (SDK 2.32) behaviour each change keeps under nki="0.6" (rows of nkisim/emulator/nki_versions.TABLE)."""
import re

import ml_dtypes
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from helpers import rand, run_tiles
import nkisim
from nkisim import NkiArgumentError, NkiValidationError

F32, BF16 = np.float32, ml_dtypes.bfloat16


def _exp(engine):
    return lambda t, o: nisa.activation(dst=o, op=nl.exp, data=t, engine=engine)


# --- activation / activate2: engine= ------------------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.activation.html
def test_activation_takes_engine_scalar_in_0_7_and_refuses_gpsimd_on_trn2(nki_version):
    a = rand((128, 16))
    if nki_version == "0.6":
        with pytest.raises(NkiArgumentError, match="nisa.activation: got an unexpected keyword argument 'engine'"):
            run_tiles(_exp(nisa.engine.scalar), a, outs=[((128, 16), F32)])
        return
    got = run_tiles(_exp(nisa.engine.scalar), a, outs=[((128, 16), F32)])
    np.testing.assert_allclose(got, np.exp(a), rtol=1e-6)
    assert nkisim.last_trace().instructions[-2].engine == "Scalar"
    with pytest.raises(NkiValidationError, match=r"activation: engine=nisa.engine.gpsimd .*NeuronCore-v4 \(trn3\).*"
                                                 r"trn2 \(NeuronCore-v3\)"):
        run_tiles(_exp(nisa.engine.gpsimd), a, outs=[((128, 16), F32)])
    with pytest.raises(NkiValidationError, match="activation: engine=.*vector is not allowed"):
        run_tiles(_exp(nisa.engine.vector), a, outs=[((128, 16), F32)])


# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.activate2.html
def test_activate2_with_engine_is_refused_as_neuroncore_v4_only_not_as_an_unknown_keyword(nki_version):
    def body(t, o):
        nisa.activate2(dst=o, op=nl.exp, data=t, imm0=1.0, imm1=0.0, op0=nl.multiply, op1=nl.add,
                       engine=nisa.engine.scalar)

    error, match = ((NkiArgumentError, "activate2: got an unexpected keyword argument 'engine'") if nki_version == "0.6"
                    else (NkiValidationError, r"nisa.activate2 is available only on NeuronCore-v4"))
    with pytest.raises(error, match=match):
        run_tiles(body, rand((8, 4)), outs=[((8, 4), F32)])


# --- tensor_partition_reduce: ops -----------------------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.tensor_partition_reduce.html
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/generated/nki.isa.tensor_partition_reduce.html
def _partition_reduce(op):
    return lambda t, o: nisa.tensor_partition_reduce(dst=o, op=op, data=t)


def test_partition_mean_is_nl_mean_in_0_7_and_nl_average_in_0_6(nki_version):
    a = rand((128, 4, 8), 3, -50, 100).astype(BF16)
    ref = a.astype(F32).mean(axis=0, keepdims=True)
    (op, name), (other, other_name) = ((nl.mean, "mean"), (nl.average, "average"))[::1 if nki_version == "0.7" else -1]
    got = run_tiles(_partition_reduce(op), a, outs=[((1, 4, 8), F32)])
    np.testing.assert_allclose(got, ref, rtol=1e-6)
    assert nkisim.last_trace().instructions[-2].attrs["op"] == name
    got_bf16 = run_tiles(_partition_reduce(op), a, outs=[((1, 4, 8), BF16)])
    np.testing.assert_array_equal(got_bf16, ref.astype(BF16))
    with pytest.raises(NkiValidationError, match=rf"op=nl.{other_name} is not a reduction of NKI {nki_version}.0's "
                                                 rf"tensor_partition_reduce"):
        run_tiles(_partition_reduce(other), a, outs=[((1, 4, 8), F32)])


def test_partition_bitwise_xor_only_in_0_7(nki_version):
    a = np.random.default_rng(5).integers(0, 1 << 30, size=(16, 8)).astype(np.int32)
    if nki_version == "0.6":
        with pytest.raises(NkiValidationError, match=r"op=nl.bitwise_xor is not a reduction of NKI 0.6.0's .*use "
                                                     r"nl.add, nl.average, nl.maximum, nl.bitwise_or or nl.bitwise_and"):
            run_tiles(_partition_reduce(nl.bitwise_xor), a, outs=[((1, 8), np.int32)])
        return
    got = run_tiles(_partition_reduce(nl.bitwise_xor), a, outs=[((1, 8), np.int32)])
    np.testing.assert_array_equal(got[0], np.bitwise_xor.reduce(a, axis=0))


def test_nl_average_is_an_identifier_not_a_callable():
    # https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/generated/nki.isa.tensor_partition_reduce.html
    # lists average as an op; the 2.32 nki.language stub has `average = ...`, a constant with no callable form
    with pytest.raises(NkiValidationError, match=r"nl.average is an operator identifier .*not a callable"):
        run_tiles(lambda t, o: nl.average(t), rand((8, 4)), outs=[((8, 4), F32)])


# --- per-API tile ranks ---------------------------------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.tensor_partition_reduce.html
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.memset.html
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.tensor_scalar_reduce.html
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.bn_aggr.html
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.reciprocal.html
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.tensor_copy_predicated.html
def _tsr(t, o, r):
    nisa.tensor_scalar_reduce(dst=o, data=t, op0=nl.multiply, operand0=2.0, reduce_op=nl.add, reduce_res=r)


def _bn_aggr(t, o):
    nisa.bn_aggr(dst=o, data=t)


RANK_CASES = [
    # (body, input, outs, the refusal under 0.7, the reference result under 0.6)
    (_partition_reduce(nl.add), rand((4, 2, 2, 2, 2, 2)), [((1, 32), F32)],
     r"tensor_partition_reduce: data has 5 free dimensions \(shape \(4, 2, 2, 2, 2, 2\)\); at most 4 \(rank 5",
     lambda a: [a.sum(axis=0).reshape(1, 32)]),
    (lambda t, o: nisa.memset(dst=o, value=1.5), rand((4, 2)), [((4, 2, 2, 2, 2, 2), F32)],
     r"memset: dst has 5 free dimensions .*; at most 4 \(rank 5 incl. the partition dim\) on NKI 0.7",
     lambda a: [np.full((4, 2, 2, 2, 2, 2), 1.5, F32)]),
    (_tsr, rand((4, 2, 2, 2, 2)), [((4, 2, 2, 2, 2), F32), ((4, 1), F32)],
     r"tensor_scalar_reduce: dst has 4 free dimensions .*; at most 3 \(rank 4",
     lambda a: [2 * a, (2 * a).reshape(4, -1).sum(axis=1, keepdims=True)]),
    (_bn_aggr, np.tile(np.array([2.0, 1.0, 0.5, 2.0, 3.0, 4.5], F32), (4, 1)).reshape(4, 1, 1, 1, 1, 6),
     [((4, 2), F32)], r"bn_aggr: data has 5 free dimensions .*; at most 4 \(rank 5", lambda a: [[[2.0, 2.25]] * 4]),
    (_bn_aggr, np.tile(np.array([2.0, 1.0, 0.5, 2.0, 3.0, 4.5], F32), (4, 1)), [((4, 1, 1, 2), F32)],
     r"bn_aggr: dst has 3 free dimensions .*; at most 2 \(rank 3", lambda a: [np.full((4, 1, 1, 2), [2.0, 2.25], F32)]),
    (lambda t, o: nisa.reciprocal(dst=o, data=t), rand((4, 2, 2, 2, 2, 1), 1, 1.0, 2.0), [((4, 2, 2, 2, 2, 1), F32)],
     r"reciprocal: dst has 5 free dimensions .*; at most 4 \(rank 5", lambda a: [1 / a]),
    (lambda p, o: nisa.tensor_copy_predicated(dst=o, src=1.5, predicate=p), np.ones((4, 2, 2, 2, 1), np.uint8),
     [((4, 2, 2, 2, 1), F32)], r"tensor_copy_predicated: dst has 4 free dimensions .*; at most 3 \(rank 4",
     lambda a: [np.full(a.shape, 1.5, F32)]),
]


@pytest.mark.parametrize("body, a, outs, refusal, reference", RANK_CASES)
def test_per_api_rank_limits_apply_to_contiguous_tiles_in_0_7_only(nki_version, body, a, outs, refusal, reference):
    if nki_version == "0.7":
        with pytest.raises(NkiValidationError, match=refusal):
            run_tiles(body, a, outs=outs)
        return
    got = run_tiles(body, a, outs=outs)
    for g, want in zip(got if len(outs) > 1 else [got], reference(a)):
        np.testing.assert_allclose(np.asarray(g, F32).reshape(np.shape(want)), want, rtol=1e-6, atol=1e-5)


@pytest.mark.usefixtures("nki_0_7")
def test_tiles_at_the_rank_limit_pass_in_0_7():
    a = rand((4, 2, 2, 2, 2))
    got = run_tiles(_partition_reduce(nl.add), a, outs=[((1, 2, 2, 2, 2), F32)])
    np.testing.assert_allclose(got, a.sum(axis=0, keepdims=True), rtol=1e-6)
    got, res = run_tiles(_tsr, a[:, 0], outs=[((4, 2, 2, 2), F32), ((4, 1), F32)])
    np.testing.assert_allclose(got, 2 * a[:, 0], rtol=1e-6)
    np.testing.assert_allclose(res[:, 0], 2 * a[:, 0].reshape(4, -1).sum(axis=1), rtol=1e-6, atol=1e-5)


# --- nl.mean over the partitions --------------------------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.language.mean.html
@pytest.mark.usefixtures("nki_0_7")
@pytest.mark.parametrize("keepdims", [False, True])
def test_nl_mean_axis_0_reduces_across_partitions_on_gpsimd_in_0_7(keepdims):
    a = rand((64, 3, 5), 7)

    def body(t, o):
        nisa.tensor_copy(dst=o, src=nl.mean(t, axis=0, keepdims=keepdims))

    got = run_tiles(body, a, outs=[((1, 3, 5), F32)])
    np.testing.assert_allclose(got, a.mean(axis=0, keepdims=True), rtol=1e-6, atol=1e-7)
    ins = [i for i in nkisim.last_trace().instructions if i.attrs.get("via") == "nl.mean"]
    assert [(i.isa, i.engine, i.attrs["op"]) for i in ins] == [("tensor_partition_reduce", "GpSimd", "mean")]


def test_nl_mean_axis_0_mixed_with_free_axes_or_under_0_6_is_refused_by_name(nki_version):
    a = rand((8, 4))
    if nki_version == "0.7":
        with pytest.raises(NkiValidationError, match=r"nl.mean: axis=\(0, 1\) mixes the partition dim \(0\) with free "
                                                     r"dims; NKI 0.7's nl.mean reduces axis 0 only on its own"):
            run_tiles(lambda t, o: nl.mean(t, axis=(0, 1)), a, outs=[((8, 4), F32)])
    else:
        with pytest.raises(NkiValidationError, match=r"nl.mean: axis=0 includes the partition dim \(0\); nl.mean "
                                                     r"reduces free axes only"):
            run_tiles(lambda t, o: nl.mean(t, axis=0), a, outs=[((8, 4), F32)])


# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.language.mean.html adds axis 0 for
# mean; the 2.33 pages of the others are not in the docs search corpus, their 2.32 pages allow free axes only
@pytest.mark.parametrize("reduction", [nl.sum, nl.max, nl.min, nl.prod, nl.var])
def test_other_reductions_refuse_axis_0_by_name(nki_version, reduction):
    with pytest.raises(NkiValidationError, match=rf"nl.{reduction.__name__}: axis=\(0, 1\) includes the partition "
                                                 rf"dim \(0\)"):
        run_tiles(lambda t, o: reduction(t, axis=(0, 1)), rand((8, 4)), outs=[((8, 4), F32)])


# --- scalar_tensor_tensor: reduce_cmd / reduce_op / reduce_res -----------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.scalar_tensor_tensor.html
def _stt(**reduction):
    def body(t, o, r):
        nisa.scalar_tensor_tensor(dst=o, data=t, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=t, **reduction)
    return body


def test_scalar_tensor_tensor_fused_reduction_is_not_emulated_in_0_7_and_unknown_in_0_6(nki_version):
    a = rand((8, 4))
    reduction = {"reduce_op": nl.add, "reduce_cmd": nisa.reduce_cmd.reset_reduce}
    if nki_version == "0.6":
        with pytest.raises(NkiArgumentError, match="scalar_tensor_tensor: got an unexpected keyword argument "
                                                   "'reduce_cmd'"):
            run_tiles(_stt(**reduction), a, outs=[((8, 4), F32), ((8, 1), F32)])
        return
    with pytest.raises(NkiValidationError, match=r"scalar_tensor_tensor's fused reduction \(reduce_cmd, reduce_op, "
                                                 r"reduce_res\) is not emulated by nkisim: .*does not say"):
        run_tiles(lambda t, o, r: _stt(reduce_op=nl.add, reduce_res=r)(t, o, r), a,
                  outs=[((8, 4), F32), ((8, 1), F32)])
    # the documented defaults, passed explicitly, change nothing
    got, _ = run_tiles(_stt(reduce_cmd=nisa.reduce_cmd.reset_reduce, reduce_op=Ellipsis, reduce_res=None), a,
                       outs=[((8, 4), F32), ((8, 1), F32)])
    np.testing.assert_allclose(got, 3 * a, rtol=1e-6)


# --- tensor_copy_predicated: reverse_pred and a scalar src ------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.tensor_copy_predicated.html
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/generated/nki.isa.tensor_copy_predicated.html
PRED = (np.arange(32).reshape(4, 8) % 3 == 0).astype(np.uint8)


def _copy_predicated(src, reverse_pred=False):
    def body(d0, p, o):
        nisa.tensor_copy(dst=o, src=d0)
        nisa.tensor_copy_predicated(dst=o, src=src, predicate=p, reverse_pred=reverse_pred)
    return body


def test_reverse_pred_needs_a_scalar_src_in_0_7(nki_version):
    src, old = rand((4, 8), 2), rand((4, 8), 3)

    def body(s, d0, p, o):
        _copy_predicated(s, reverse_pred=True)(d0, p, o)
    if nki_version == "0.7":
        with pytest.raises(NkiValidationError, match=r"tensor_copy_predicated: reverse_pred=True needs a scalar src "
                                                     r"on NKI 0.7, src is a tile"):
            run_tiles(body, src, old, PRED, outs=[((4, 8), F32)])
    else:
        got = run_tiles(body, src, old, PRED, outs=[((4, 8), F32)])
        np.testing.assert_array_equal(got, np.where(PRED == 0, src, old))
    got = run_tiles(_copy_predicated(-2.5, reverse_pred=True), old, PRED, outs=[((4, 8), F32)])
    np.testing.assert_array_equal(got, np.where(PRED == 0, F32(-2.5), old))


@pytest.mark.parametrize("src, dtype", [(2.5, np.int32), (3, F32), (np.float32(1.0), np.int8), (np.int32(4), BF16)])
def test_a_scalar_src_must_match_dsts_kind_in_0_7_only(nki_version, src, dtype):
    old = np.zeros((4, 8), dtype)
    if nki_version == "0.7":
        kind, needs = ("an int", "an integer") if isinstance(src, (int, np.integer)) else ("a float", "a float")
        with pytest.raises(NkiValidationError, match=rf"src={re.escape(repr(src))} is {kind}, so dst needs {needs} "
                                                     rf"dtype on NKI 0.7, got {np.dtype(dtype).name}"):
            run_tiles(_copy_predicated(src), old, PRED, outs=[((4, 8), dtype)])
        return
    got = run_tiles(_copy_predicated(src), old, PRED, outs=[((4, 8), dtype)])   # 2.5 into int32: RNE, 2
    np.testing.assert_array_equal(got, np.where(PRED != 0, np.round(F32(src)).astype(dtype), old))


@pytest.mark.parametrize("src, dtype", [(100, np.int8), (16777217, np.int32), (-7, np.int16), (0.1, BF16)])
def test_a_scalar_src_is_materialized_in_dsts_dtype(nki_version, src, dtype):
    # the 2.33 page: "the scalar is materialized in dst's dtype, so e.g. a Python int may be copied into an
    # int8"; an int is copied exactly (16777217 has no float32), in both versions ("the scalar is copied")
    old = np.ones((4, 8), dtype)
    got = run_tiles(_copy_predicated(src), old, PRED, outs=[((4, 8), dtype)])
    np.testing.assert_array_equal(got, np.where(PRED != 0, np.asarray(src).astype(dtype), old))


# --- max8: ranks ------------------------------------------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.isa.max8.html
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/generated/nki.isa.max8.html
def _max8(t, o):
    nisa.max8(dst=o, src=t)


@pytest.mark.parametrize("src_shape, dst_shape", [((4, 2, 2, 2, 3), (4, 8)), ((4, 24), (4, 2, 4)),
                                                  ((4, 3, 2, 2, 2), (4, 1, 8))])
def test_max8_takes_a_rank_5_src_and_a_rank_3_dst_in_0_7_only(nki_version, src_shape, dst_shape):
    a = rand(src_shape, 4).astype(BF16)
    if nki_version == "0.6":
        match = r"max8: src is 5-D; it can be at most 3-D" if len(src_shape) == 5 else r"max8: dst must be 2-D \[4, 8\]"
        with pytest.raises(NkiValidationError, match=match):
            run_tiles(_max8, a, outs=[(dst_shape, F32)])
        return
    got = run_tiles(_max8, a, outs=[(dst_shape, F32)])
    want = -np.sort(-a.astype(F32).reshape(4, -1), axis=1)[:, :8]
    np.testing.assert_array_equal(got.reshape(4, 8), want)


@pytest.mark.usefixtures("nki_0_7")
def test_max8_ranks_beyond_the_page_are_refused_in_0_7():
    with pytest.raises(NkiValidationError, match=r"max8: src has 5 free dimensions .*; at most 4 \(rank 5"):
        run_tiles(_max8, rand((4, 2, 2, 2, 2, 1)), outs=[((4, 8), F32)])
    with pytest.raises(NkiValidationError, match=r"max8: dst has 3 free dimensions .*; at most 2 \(rank 3"):
        run_tiles(_max8, rand((4, 16)), outs=[((4, 2, 2, 2), F32)])
