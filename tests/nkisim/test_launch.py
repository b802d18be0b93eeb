"""Launches: LNC=2 sharding, the trace the cost model reads, dry run, and the SBUF footprint."""
import warnings

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
import torch

import nkisim
from nkisim import SBUF_USABLE_BYTES_PER_PARTITION, NkiRaceWarning, NkiValidationError
from nkisim.emulator.trace import Region


@nki.jit
def sharded_exp(x):
    R, C = x.shape
    out = nl.ndarray((R, C), dtype=x.dtype, buffer=nl.shared_hbm)
    rows = R // nl.num_programs()
    base = nl.program_id(0) * rows
    for t in nl.affine_range(rows // 128):
        r0 = base + t * 128
        tile = nl.ndarray((128, C), dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x[r0:r0 + 128, :], dge_mode=nisa.dge_mode.none, name="load")
        nisa.activation(dst=tile, op=nl.exp, data=tile, name="exp")
        nisa.dma_copy(dst=out[r0:r0 + 128, :], src=tile, dge_mode=nisa.dge_mode.none, name="store")
    return out


def test_lnc2_disjoint_row_shards_write_one_shared_output():
    x = np.random.default_rng(0).standard_normal((512, 16)).astype(np.float32)
    r = nkisim.run(sharded_exp, x, lnc=2)
    assert np.allclose(r.outputs, np.exp(x), rtol=1e-6)
    assert r.trace.lnc == 2 and len(r.trace.program(0)) == len(r.trace.program(1)) == 6
    loads = [i for i in r.trace if i.name == "load"]
    assert [i.program_id for i in loads] == [0, 0, 1, 1]
    assert np.allclose(sharded_exp[2](x), np.exp(x), rtol=1e-6)   # the kernel[2] spelling


def test_nki_simulate_runs_on_the_cpu_with_no_compiler_lnc_to_agree_with(nki_version, monkeypatch):
    """nki.simulate "executes the kernel on CPU" (its page; `nki.simulate(my_kernel[2])` for LNC 2): no
    neuronx-cc or runtime takes part, so NEURON_LOGICAL_NC_CONFIG does not have to match the launch's LNC, as a
    jit launch must (EVRF066 under NKI 0.7, the runtime's LNC under 0.6). A plain function is wrapped."""
    x = np.random.default_rng(0).standard_normal((256, 4)).astype(np.float32)
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    with pytest.raises(NkiValidationError, match="LNC"):
        sharded_exp[2](x)
    assert np.allclose(nki.simulate(sharded_exp[2])(x), np.exp(x), rtol=1e-6)
    assert np.allclose(nki.simulate(sharded_exp.fn)(x), np.exp(x), rtol=1e-6)
    r = nkisim.run(nki.simulate(sharded_exp), x)          # unbracketed: the launch's own LNC, 1 here
    assert r.trace.lnc == 1


def test_nki_precise_fp_0_warns_that_float32_storage_is_not_offered(monkeypatch):
    """The simulator guide's NKI_PRECISE_FP=0 stores low-precision tensors as float32; nkisim keeps trn2's
    rounding, and says so rather than return bf16 results under a setting that asked for float32 ones."""
    x = np.ones((128, 4), np.float32)
    monkeypatch.setenv("NKI_PRECISE_FP", "0")
    with pytest.warns(nkisim.NkiWarning, match="NKI_PRECISE_FP=0 .* not offered"):
        nki.simulate(sharded_exp)(x)
    monkeypatch.setenv("NKI_PRECISE_FP", "1")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nki.simulate(sharded_exp)(x)


def test_num_programs_and_program_id():
    seen = []
    record = seen.append

    @nki.jit
    def k(x):
        record((nl.program_id(0), nl.num_programs(), nl.num_programs(None)))

    k[2](np.zeros(1, np.float32))
    k(np.zeros(1, np.float32))
    assert seen == [(0, 2, 2), (1, 2, 2), (0, 1, 1)]


def test_lnc2_overlapping_writes_of_equal_values_warn_and_of_different_values_fail():
    @nki.jit
    def unsharded(x, offset_by_program):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=tile, src=x)
        nisa.tensor_scalar(dst=tile, data=tile, op0=nl.add, operand0=float(offset_by_program * nl.program_id(0)))
        nisa.dma_copy(dst=out, src=tile)     # both programs write every row
        return out

    x = np.arange(512, dtype=np.float32).reshape(128, 4)
    with pytest.warns(NkiRaceWarning, match=r"program 1 writes 512 elements of shared HBM tensor .* that program 0 "
                                            r"already wrote, with the same values: the result does not depend on the "
                                            r"order.*\(test_launch.py:\d+\)"):
        assert np.array_equal(unsharded[2](x, 0), x)
    with pytest.raises(NkiValidationError, match=r"program 1 writes 512 elements .* with different values: on trn2 "
                                                 r"the two cores race .* disjoint rows"):
        unsharded[2](x, 1)
    with pytest.warns(NkiRaceWarning, match="a dry run cannot compare the values"):
        nkisim.run(unsharded, x, 1, lnc=2, dry_run=True)


def test_lnc2_shared_allocations_must_agree():
    @nki.jit
    def k(x):
        nl.ndarray((4, 4 + nl.program_id(0)), dtype=nl.float32, buffer=nl.shared_hbm)

    with pytest.raises(NkiValidationError, match=r"program 1 allocated shared_hbm tensor #0 as \(4, 5\) float32, "
                                                 r"program 0 as \(4, 4\)"):
        k[2](np.zeros(1, np.float32))


def test_lnc2_shared_tensors_of_one_name_are_one_tensor_in_any_order():
    """"the compiler uses the name to link non-IO shared_hbm tensors among PNCs ... as long as they have the same
    name, even if the tensors appear in different control flow" (nl.ndarray, SDK 2.28.1)."""
    @nki.jit
    def k(x):
        pid = nl.program_id(0)
        names = ("a", "b") if pid == 0 else ("b", "a")
        made = {n: nl.ndarray((1, 4 if n == "a" else 8), dtype=nl.float32, buffer=nl.shared_hbm, name=n)
                for n in names}
        if pid == 0:
            nl.ndarray((2, 2), dtype=nl.float32, buffer=nl.shared_hbm, name="core0_only")
            t = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.dma_copy(dst=made["a"], src=t)
        nisa.core_barrier(made["a"], (0, 1))
        out = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.shared_hbm, name="out")
        if pid == 1:
            t = nl.ndarray((1, 4), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=made["a"])         # core 0's write, through the tensor named "a"
            nisa.dma_copy(dst=out, src=t)
        return out

    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    assert np.array_equal(nkisim.run(k[2], x).outputs, x)


def test_trace_records_engines_opcodes_dma_and_sources():
    x = torch.randn(256, 32)
    sharded_exp[2](x)
    tr = nkisim.last_trace()
    load = tr.instructions[0]
    assert (load.engine, load.opcode, load.isa, load.name) == ("DMA", "DMA", "dma_copy", "load")
    assert load.dma.direction == "hbm->sbuf" and load.dma.queue_engine == "none"
    assert load.dma.nbytes == 128 * 32 * 4 and load.dma.partitions == 128 and load.dma.bytes_per_partition == 128
    assert load.elements_per_partition == 32 and load.partitions == 128
    assert load.source.startswith("test_launch.py:")
    act = tr.instructions[1]
    assert (act.engine, act.opcode, act.attrs["func"]) == ("Scalar", "ACTIVATE", "exp")
    assert act.reads[0].region == load.writes[0].region      # producer -> consumer dependency visible
    assert tr.counts() == {("DMA", "DMA"): 4, ("Scalar", "ACTIVATE"): 2}


@nki.jit
def views_of_one_tile(x):
    t = nl.ndarray((128, 4, 16), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    # DMAs, not engines, write the partition ranges no engine access may take (start partition 4,
    # partition striding, start partition 124)
    nisa.dma_copy(dst=t[4:8, 1, 2:10], src=x[0:4, 0:8])  # a partition range, one slot, columns 2..9
    nisa.dma_copy(dst=t[::-2, :, 15], src=x)          # every other partition from the last, column 15
    nisa.dma_copy(dst=t[0:2, 0, :], src=x[2:4, 5:21])  # an HBM window: rows 2-3, columns 5..20
    nisa.dma_copy(dst=t[-4:-2], src=x[0:4])           # negative bounds
    return None


@pytest.mark.parametrize("index, operand, expected", [
    (0, "dst", Region(2, 0, 128, 0, 64, 4)),
    (1, "dst", Region(2, 4, 8, 18, 26, 4)),             # slot 1 starts at element 16
    (2, "dst", Region(2, 1, 128, 15, 64, 4)),            # the bounding box of the reversed, strided view
    (3, "src", Region(1, 0, 1, 2 * 32 + 5, 3 * 32 + 21, 4)),
    (4, "dst", Region(2, 124, 126, 0, 64, 4)),
])
def test_regions_are_the_bounding_boxes_of_the_views(index, operand, expected):
    run = nkisim.run(views_of_one_tile, np.zeros((8, 32), np.float32))
    ins = run.trace.instructions[index]
    (op,) = [o for o in ins.reads + ins.writes if o.role == operand]
    assert op.region == expected


def test_trace_engine_defaults_and_queue_engines():
    @nki.jit
    def k(x):
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        c = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge)
        nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge, engine=nisa.engine.scalar)
        nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add)
        nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add, engine=nisa.engine.gpsimd)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=1.0,
                           engine=nisa.engine.scalar)
        nisa.tensor_reduce(dst=c, op=nl.add, data=t, axis=1)
        nisa.tensor_copy(dst=t, src=t)
        nisa.memset(dst=t, value=0.0)
        nisa.reciprocal(dst=t, data=t)
        nisa.activation_reduce(dst=t, op=nl.square, data=t, reduce_op=nl.add, reduce_res=c)

    k(np.ones((128, 8), np.float32))
    tr = nkisim.last_trace()
    assert [i.dma.queue_engine for i in tr if i.dma] == ["GpSimd", "Sync", "Scalar"]
    assert [(i.engine, i.opcode) for i in tr][3:] == [
        ("Vector", "TENSOR_TENSOR"), ("GpSimd", "TENSOR_TENSOR"), ("Scalar", "TENSOR_SCALAR"),
        ("Vector", "TENSOR_REDUCE"), ("Vector", "TENSOR_COPY"), ("Vector", "MEMSET"), ("Vector", "RECIPROCAL"),
        ("Scalar", "ACTIVATE")]
    last = tr.instructions[-1]
    assert last.isa == "activation_reduce" and last.attrs["accumulate"] and last.attrs["reads_accumulator"]
    assert tr.instructions[5].attrs == {"op0": "multiply", "op1": "add", "reverse0": False, "reverse1": False,
                                        "dtype": "float32"}


def test_dry_run_validates_and_traces_without_computing():
    x = np.ones((256, 16), np.float32)
    r = nkisim.run(sharded_exp, x, lnc=2, dry_run=True)
    assert r.trace.dry_run and len(r.trace) == 6 and r.outputs.shape == (256, 16)
    assert np.all(np.isnan(r.outputs))               # placeholders hold the "never written" sentinel

    def too_tall(x):                                 # a plain function: run() wraps it in nki.jit
        t = nl.ndarray((256, 4), nl.float32)
        nisa.activation(dst=t, op=nl.exp, data=t)

    with pytest.raises(NkiValidationError, match="activation: dst partition dimension 256 exceeds maximum 128"):
        nkisim.run(too_tall, x, dry_run=True)


def test_fake_and_meta_tensors_give_shaped_outputs():
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        fake = torch.empty(256, 16, dtype=torch.bfloat16)
        out = sharded_exp(fake)
    assert type(out).__name__ == "FakeTensor" and out.shape == (256, 16) and out.dtype == torch.bfloat16
    meta = sharded_exp(torch.empty(256, 16, device="meta"))
    assert meta.device.type == "meta" and nkisim.last_trace().dry_run


def _footprint_kernel(H, n_tiles):
    """The fold kernel's live set: fp32 `a` slots, bf16 branch slots, fp32 sum slots, all tiles at once,
    plus a bf16 z tile, a bf16 scratch tile and four [128, n_tiles] fp32 statistic columns."""

    @nki.jit
    def k(x):
        a = nl.ndarray((128, n_tiles, H), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, n_tiles, H), dtype=nl.bfloat16, buffer=nl.sbuf)
        s = nl.ndarray((128, n_tiles, H), dtype=nl.float32, buffer=nl.sbuf)
        z = nl.ndarray((128, H), dtype=nl.bfloat16, buffer=nl.sbuf)
        scratch = nl.ndarray((128, H), dtype=nl.bfloat16, buffer=nl.sbuf)
        stats = [nl.ndarray((128, n_tiles), dtype=nl.float32, buffer=nl.sbuf) for _ in range(4)]
        for t in range(n_tiles):                      # all loads first
            nisa.dma_copy(dst=a[:, t, :], src=x[:, 0:H])
            nisa.dma_copy(dst=b[:, t, :], src=x[:, 0:H])
        for t in range(n_tiles):
            nisa.tensor_tensor(dst=s[:, t, :], data1=a[:, t, :], data2=b[:, t, :], op=nl.add)
            for col in stats:
                nisa.activation_reduce(dst=scratch, op=nl.copy, data=s[:, t, :], reduce_op=nl.add,
                                       reduce_res=col[:, t:t + 1])
            nisa.tensor_copy(dst=z, src=s[:, t, :])

    return k


def test_sbuf_footprint_of_the_published_fold_kernel_that_compiled_passes():
    # H=1280, 16 tiles, one branch: H*(8+2B)*16 = 204,800 B of slots (published: compiled).
    r = nkisim.run(_footprint_kernel(1280, 16), np.zeros((128, 1280), np.float32), dry_run=True)
    slots = 1280 * (4 + 2 + 4) * 16
    assert slots == 204_800
    assert r.sbuf_peak_bytes == slots + 2 * 1280 * 2 + 4 * 16 * 4 <= SBUF_USABLE_BYTES_PER_PARTITION
    assert r.trace.sbuf_peak_bytes_per_partition == {0: r.sbuf_peak_bytes}


def test_sbuf_footprint_of_the_published_failing_case_is_rejected():
    # H=384, 56 tiles, one branch: 215,040 B of slots (published: failed to compile).
    with pytest.raises(NkiValidationError, match=r"SBUF capacity: program 0 needs 2\d{5} bytes per partition .* "
                                                 r"usable 212728 bytes .* \(128, 56, 384\) float32 = 86016 B "
                                                 r"\(test_launch.py:\d+\)"):
        nkisim.run(_footprint_kernel(384, 56), np.zeros((128, 384), np.float32), dry_run=True)


def test_sbuf_liveness_lets_dead_tiles_be_reused():
    @nki.jit
    def k(x):
        for _ in range(10):                       # 10 x 40 KiB allocated, one live at a time
            t = nl.ndarray((128, 10240), dtype=nl.float32, buffer=nl.sbuf)
            nisa.dma_copy(dst=t, src=x)
            nisa.dma_copy(dst=x, src=t)

    r = nkisim.run(k, np.zeros((128, 10240), np.float32), dry_run=True)
    assert r.sbuf_peak_bytes == 10240 * 4
