"""The instructions of isa_vector / isa_search / isa_gpsimd / isa_random / isa_dma / collectives /
registers in the trace and the trn2 cost model: each record carries its registered opcode and
engine, and every one of them is placed on its lane by the scheduler."""
import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np

import nkisim
from nkisim import vocabulary

P, N = 32, 64


@nki.jit
def many(x, seeds, ids):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    col = nl.ndarray((P, 1), dtype=nl.float32, buffer=nl.sbuf)
    top = nl.ndarray((P, 8), dtype=nl.float32, buffer=nl.sbuf)
    idx = nl.ndarray((P, 8), dtype=nl.uint32, buffer=nl.sbuf)
    state = nl.ndarray((P, 6), dtype=nl.uint32, buffer=nl.sbuf)
    bits = nl.ndarray((P, N), dtype=nl.uint16, buffer=nl.sbuf)
    stats = nl.ndarray((P, 6), dtype=nl.float32, buffer=nl.sbuf)
    ids_sb = nl.ndarray((1, 16), dtype=nl.int32, buffer=nl.sbuf)
    bounds = nl.ndarray((1, 2, 16), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=state, src=seeds)
    nisa.dma_copy(dst=ids_sb, src=ids)
    nisa.iota(dst=u, pattern=[[1, N]], channel_multiplier=N)
    nisa.affine_select(dst=u, pattern=[[-1, N]], channel_multiplier=1, on_true_tile=u, on_false_value=0.0,
                       cmp_op=nl.greater_equal)
    nisa.scalar_tensor_tensor(dst=u, data=t, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=u)
    nisa.tensor_tensor_scan(dst=u, data0=t, data1=u, initial=0.0, op0=nl.multiply, op1=nl.add)
    nisa.tensor_scalar_reduce(dst=u, data=u, op0=nl.add, operand0=1.0, reduce_op=nl.add, reduce_res=col)
    nisa.max8(dst=top, src=u)
    nisa.nc_find_index8(dst=idx, data=u, vals=top)
    nisa.nc_match_replace8(dst=u, data=u, vals=top, imm=0.0)
    nisa.bn_stats(dst=stats, data=u)
    nisa.rand_set_state(src_seeds=state)
    nisa.rng(dst=bits, engine=nisa.engine.gpsimd)
    nisa.sequence_bounds(dst=bounds, segment_ids=ids_sb)
    n_reg = nisa.register_alloc(2)
    nl.fori_loop(0, n_reg, lambda _: nisa.dropout(dst=u, data=u, prob=0.1))
    nisa.dma_compute(dst=out, srcs=[u, t], reduce_op=nl.add)
    return out


def test_new_instructions_trace_their_registration_and_cost_on_their_lanes():
    x = np.random.default_rng(0).random((P, N)).astype(np.float32)
    seeds = np.arange(1, P * 6 + 1, dtype=np.uint32).reshape(P, 6)
    ids = np.array([[1, 1, 2, 2, 2, 0, 3, 3, 3, 3, 4, 0, 0, 5, 5, 5]], np.int32)
    r = nkisim.run(many, x, seeds, ids)
    isas = [i.isa for i in r.trace.instructions]
    assert isas.count("dropout") == 2
    for ins in r.trace.instructions:
        spec = vocabulary.spec(ins.isa)
        assert ins.opcode == spec.opcode and ins.engine in spec.engines, ins.isa
    summary = nkisim.estimate(r.trace)
    assert summary.engine_active_time["GpSimd"] > 0 and summary.engine_active_time["Vector"] > 0
    counts = summary.instruction_counts
    assert counts[("GpSimd", "IOTA")] == 1 and counts[("Vector", "TENSOR_TENSOR_SCAN")] == 1
    assert counts[("Vector", "DROPOUT")] == 2


def test_scalar_tensor_tensor_costs_like_tensor_tensor():
    """The scalar_tensor_tensor page: about the latency of one tensor_tensor."""
    x = np.ones((128, 512), np.float32)

    @nki.jit
    def both(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=a, src=x)
        nisa.tensor_tensor(dst=b, data1=a, data2=a, op=nl.add)
        nisa.scalar_tensor_tensor(dst=b, data=a, op0=nl.multiply, operand0=3.0, op1=nl.add, operand1=b)
        nisa.dma_copy(dst=out, src=b)
        return out
    from nkisim.costmodel.costs import compute_seconds
    tt, stt = [i for i in nkisim.run(both, x).trace.instructions if i.engine == "Vector"]
    assert compute_seconds(tt) == compute_seconds(stt)
