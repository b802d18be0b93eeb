"""The vocabulary table: one registration gives an instruction its engine, trace record, cost rule
and timeline colour; engine, queue and dge-mode names agree between the tables and `nki.isa`."""
import matplotlib

matplotlib.use("Agg")

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
from matplotlib.colors import to_hex

import nkisim
from nkisim import vocabulary
from nkisim.costmodel import constants as K
from nkisim.emulator.issue import Issue, rows_f32
from nkisim.emulator import dtypes

TOY_COLOR = "#123456"


def _toy_cycles(ins) -> float:
    return 3 * ins.elements_per_partition


@pytest.fixture
def toy_negate():
    """A toy instruction, registered for one test: dst = -data, on GpSimd (default) or Vector."""

    @vocabulary.instruction("TOY_NEGATE", engines=(vocabulary.GPSIMD, vocabulary.VECTOR), cost=_toy_cycles,
                            color=TOY_COLOR)
    def toy_negate(dst, data, engine=nisa.engine.unknown, name=None):
        c = Issue("toy_negate", name)
        dst, data = c.tensor("dst", dst), c.tensor("data", data)
        c.same_layout("dst", dst, ("data", data))
        ins = c.record(c.lane(engine), [("data", data)], [("dst", dst)], {"dtype": "float32"})
        if c.prog.compute:
            dtypes.store(dst.arr, -rows_f32(data))
        return ins

    yield toy_negate
    vocabulary.unregister("toy_negate")


def test_a_registered_instruction_is_emulated_traced_costed_and_drawn(toy_negate):
    @nki.jit
    def negate(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        toy_negate(dst=u, data=t, name="neg")
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=u)
        return out

    x = np.linspace(-2, 2, 128 * 300, dtype=np.float32).reshape(128, 300)
    result = nkisim.run(negate, x)
    np.testing.assert_array_equal(result.outputs, -x)                       # emulated
    (ins,) = [i for i in result.trace if i.isa == "toy_negate"]
    assert (ins.opcode, ins.engine, ins.name) == ("TOY_NEGATE", "GpSimd", "neg")   # traced, default engine
    summary = nkisim.estimate(result.trace)
    expected = (max(K.MIN_II_CYCLES, 3 * 300) + K.GPSIMD_START_CYCLES) / K.GPSIMD_CLOCK_HZ
    assert summary.instruction_time[("GpSimd", "TOY_NEGATE")] == pytest.approx(expected)   # costed by its rule
    fig = nkisim.show_timeline(summary)
    colors = {to_hex(c) for coll in fig.axes[0].collections for c in coll.get_facecolors()}
    assert TOY_COLOR in colors                                                # drawn in its colour
    legend = {t.get_text() for t in fig.legends[0].get_texts()}
    assert "TOY_NEGATE" in legend


def test_the_engine_argument_is_checked_against_the_registered_engines(toy_negate):
    @nki.jit
    def on_scalar(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        toy_negate(dst=t, data=t, engine=nisa.engine.scalar)
        return t

    with pytest.raises(nkisim.NkiValidationError,
                       match=r"toy_negate: engine=nisa.engine.scalar is not allowed; toy_negate runs on "
                             r"nisa.engine.gpsimd, nisa.engine.vector"):
        nkisim.run(on_scalar, np.zeros((4, 4), np.float32))


def test_registration_rejects_inconsistent_entries():
    def activation():  # a second registration of an existing name
        pass

    with pytest.raises(ValueError, match="'activation' is already registered"):
        vocabulary.instruction("ACTIVATE", engines=(vocabulary.SCALAR,), cost=_toy_cycles, color="#e8852f")(activation)

    def mystery():
        pass

    with pytest.raises(ValueError, match="engines .* must be among"):
        vocabulary.instruction("MYSTERY", engines=("Matrix",), cost=_toy_cycles, color="#000000")(mystery)
    with pytest.raises(ValueError, match="needs a cost rule"):
        vocabulary.instruction("MYSTERY", engines=(vocabulary.VECTOR,), cost=None, color="#000000")(mystery)
    with pytest.raises(ValueError, match="opcode ACTIVATE is already drawn in #e8852f"):
        vocabulary.instruction("ACTIVATE", engines=(vocabulary.SCALAR,), cost=_toy_cycles, color="#000000")(mystery)
    with pytest.raises(ValueError, match="collective 'allreduce' must be None or one of"):
        vocabulary.instruction("MYSTERY", engines=(vocabulary.VECTOR,), cost=_toy_cycles, color="#000000",
                               collective="allreduce")(mystery)
    with pytest.raises(ValueError, match=r"an exchange moves data, so it runs on \(DMA,\), not \('Vector',\)"):
        vocabulary.instruction("MYSTERY", engines=(vocabulary.VECTOR,), cost=_toy_cycles, color="#000000",
                               collective=vocabulary.EXCHANGE)(mystery)
    with pytest.raises(ValueError, match="'mystery' is not registered"):
        vocabulary.spec("mystery")
    assert vocabulary.spec("core_barrier").collective == vocabulary.BARRIER
    assert vocabulary.spec("sendrecv").collective == vocabulary.EXCHANGE


def test_every_emulated_instruction_is_registered_with_a_known_engine_and_a_colour():
    table = vocabulary.registered()
    assert {"dma_copy", "activation", "tensor_tensor", "tensor_scalar"} <= set(table)
    for isa, spec in table.items():
        assert hasattr(nisa, isa), f"{isa} is registered but not in nki.isa"
        assert spec.color.startswith("#") and vocabulary.opcode_color(spec.opcode) == spec.color


def test_enum_members_and_tables_agree():
    engines = {e.name for e in nisa.engine} - {"unknown", "dma"}
    assert engines == set(vocabulary.ENGINE_BY_NISA_NAME)
    assert set(vocabulary.ENGINE_BY_NISA_NAME.values()) == set(vocabulary.ENGINES)
    assert {m.name for m in nisa.dge_mode} == set(vocabulary.DGE_MODES)
    assert set(K.DGE_SECONDS_ATTRIBUTE) == set(vocabulary.DGE_MODES)
    assert set(K.ENGINE_CLOCK_HZ) == set(vocabulary.ENGINES)
    for mode in vocabulary.DGE_MODES.values():
        assert all(q in vocabulary.DMA_QUEUE_LANES for q in mode.queues)


def test_dma_queue_by_dge_mode_and_engine():
    assert vocabulary.dma_queue("unknown") == "GpSimd" and vocabulary.dma_queue("none") == "none"
    assert vocabulary.dma_queue("hwdge") == "Sync" and vocabulary.dma_queue("hwdge", "Scalar") == "Scalar"
    with pytest.raises(ValueError, match="hwdge DMAs are issued from the Sync or Scalar queue, not 'GpSimd'"):
        vocabulary.dma_queue("hwdge", "GpSimd")
    with pytest.raises(ValueError, match="unknown dge_mode 'fast'"):
        vocabulary.dma_queue("fast")
