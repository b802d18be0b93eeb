"""What the NKI 0.7 (Neuron SDK 2.33) pages of nki.jit, nki.compiler, nki.collectives and nki.language
document and the 2.32 pages do not, against nkisim under both versions: nkisim.run's LNC without lnc=,
nki.jit's compile_config= / specialization_config= and the nki.compiler objects, the new
nki.collectives.rg_partition_op, nl.fori_loop's induction value, nl.empty_like's transpose_axes= and
address=, the HBM form of nl.ndarray's address=, nl.zeros_like's default buffer, and the dtype nl.int64. Each rule is a
row of nkisim.emulator.nki_versions.TABLE; each test names its page."""
import nki
import nki.collectives
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

import nkisim
from nkisim import NkiValidationError
from nkisim.emulator import nki_versions
from nkisim.emulator.compiler import AddressRotation, CompileConfig, SpecializationConfig
from nkisim.emulator.errors import NkiArgumentError, NkiRemovedApiError, NkiWarning

from helpers import copy_through_sbuf, inside_a_kernel


def _inside_a_kernel(body):
    """What body(x) returns when it runs inside a one-program launch."""
    return inside_a_kernel(body, np.zeros((4, 8), np.float32))


# --- nkisim.run takes an unbracketed launch's LNC -------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/nki/api/generated/nki.jit.html (LNC from
# NEURON_LOGICAL_NC_CONFIG); https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/nki/get-started/about/lnc.html
@nki.jit
def row_halves(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    rows = x.shape[0] // nl.num_programs(0)
    lo = nl.program_id(0) * rows
    t = nl.ndarray((rows, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[lo:lo + rows, :])
    nisa.dma_copy(dst=out[lo:lo + rows, :], src=t)
    return out


def test_nkisim_run_without_lnc_takes_the_variable_like_a_plain_launch(monkeypatch):
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    monkeypatch.delenv("NEURON_CC_FLAGS", raising=False)
    x = np.arange(256 * 4, dtype=np.float32).reshape(256, 4)
    with nki_versions.emulating("0.7"):
        run = nkisim.run(row_halves, x)
        assert run.trace.lnc == 2 and np.array_equal(run.outputs, x)
    with nki_versions.emulating("0.6"):         # 0.6: the bracket (default 1) must equal the variable
        with pytest.raises(NkiValidationError, match="launched with LNC=1 but NEURON_LOGICAL_NC_CONFIG=2"):
            nkisim.run(row_halves, x)
        assert nkisim.run(row_halves, x, lnc=2).trace.lnc == 2


# --- nki.jit(compile_config=, specialization_config=) and nki.compiler -----------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/nki/api/generated/nki.jit.html;
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/nki/api/nki.compiler.html and its source
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.1/_modules/nki/compiler.html
def test_jit_records_compile_and_specialization_configs_under_0_7():
    with nki_versions.emulating("0.7"):
        from nki.compiler import AddressRotation as Rotation, CompileConfig as Config
        config = Config(non_ssa_legalization=True, address_rotation=Rotation.DISABLE)
        k = nki.jit(copy_through_sbuf, compile_config=config, specialization_config=SpecializationConfig())
        x = np.arange(32, dtype=np.float32).reshape(4, 8)
        assert np.array_equal(k(x), x)           # the options steer neuronx-cc, not results
        assert k.compile_config == config and config.barrier_check is ...   # unset: the compiler's default
        assert nki.jit(compile_config=config)(copy_through_sbuf).compile_config is config


def test_compiler_configs_check_option_names_and_types():
    with pytest.raises(NkiArgumentError, match=r"CompileConfig: unknown option 'fast' \(its options: "
                                               r"address_rotation, non_ssa_legalization"):
        CompileConfig(fast=True)
    with pytest.raises(NkiArgumentError, match="CompileConfig: barrier_check must be a bool, got int 1"):
        CompileConfig(barrier_check=1)
    with pytest.raises(NkiArgumentError, match="address_rotation must be a AddressRotation, got str 'auto'"):
        CompileConfig(address_rotation="auto")
    with pytest.raises(NkiArgumentError, match="SpecializationConfig: unknown option 'barrier_check'"):
        SpecializationConfig(barrier_check=True)
    with nki_versions.emulating("0.7"):
        with pytest.raises(NkiArgumentError, match=r"nki.jit: compile_config must be an nki.compiler.CompileConfig, "
                                                   r"got dict"):
            nki.jit(copy_through_sbuf, compile_config={"barrier_check": True})
        with pytest.raises(NkiArgumentError, match="specialization_config must be an nki.compiler.Specialization"):
            nki.jit(copy_through_sbuf, specialization_config=CompileConfig())


def test_nki_0_6_refuses_the_configs_and_nki_compiler():
    with nki_versions.emulating("0.6"):
        with pytest.raises(NkiArgumentError, match=r"nki.jit's compile_config= is not in NKI 0.6.0: .*arrives with "
                                                   r"NKI 0.7"):
            nki.jit(copy_through_sbuf, compile_config=CompileConfig())
        with pytest.raises(NkiRemovedApiError, match="nki.compiler.CompileConfig is not in NKI 0.6.0: .*arrives "
                                                     "with NKI 0.7"):
            nki.compiler.CompileConfig  # noqa: B018
        with pytest.raises(NkiArgumentError, match=r"unexpected keyword argument 'fast' \(its options: mode, .*"
                                                   r"experimental_flags\)"):
            nki.jit(copy_through_sbuf, fast=True)


@nki.jit(compile_config=CompileConfig(dead_code_elim=False))
def _fills(t):
    nisa.memset(dst=t, value=1.0)


@nki.jit
def _fills_inheriting(t):
    nisa.memset(dst=t, value=2.0)


def _calls(inner, **configs):
    def outer(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        inner(t)
        nisa.dma_copy(dst=out, src=t)
        return out
    return nki.jit(outer, **configs)


def test_a_nested_kernel_with_another_config_raises_unless_the_top_level_allows_it():
    # SpecializationConfig.allow_nested_config_override: warn instead of raising, inline under the top's config
    # (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.compiler.SpecializationConfig.html)
    x = np.zeros((4, 8), np.float32)
    with nki_versions.emulating("0.7"):
        with pytest.raises(NkiValidationError, match=r"sub-kernel '_fills' has compile_config=CompileConfig\("
                                                     r"dead_code_elim=False\), the top-level kernel 'outer' "
                                                     r"compile_config=None.*allow_nested_config_override=True"):
            _calls(_fills)(x)
        allowing = SpecializationConfig(allow_nested_config_override=True)
        with pytest.warns(NkiWarning, match="inlined under the top-level kernel's config"):
            assert np.all(_calls(_fills, specialization_config=allowing)(x) == 1.0)
        same = _calls(_fills, compile_config=CompileConfig(dead_code_elim=False))
        assert np.all(same(x) == 1.0)
        assert np.all(_calls(_fills_inheriting, compile_config=CompileConfig(barrier_check=True))(x) == 2.0)


# --- nki.collectives.rg_partition_op ---------------------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.collectives.ReplicaGroup.html;
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/_modules/nki/collectives.html
def test_rg_partition_op_is_a_not_emulated_0_7_name():
    with nki_versions.emulating("0.7"):
        with pytest.raises(NkiValidationError, match="nki.collectives.rg_partition_op is not emulated by nkisim: how "
                                                     "ReplicaGroup.from_partition_op groups ranks for a collective"):
            nki.collectives.rg_partition_op.div  # noqa: B018
        with pytest.raises(NkiValidationError, match="nki.collectives.ReplicaGroup is not emulated by nkisim: a "
                                                     "collective between NeuronCores"):
            nki.collectives.ReplicaGroup.from_partition_op(8, None, 4)
    with nki_versions.emulating("0.6"):
        with pytest.raises(NkiRemovedApiError, match="nki.collectives.rg_partition_op is not in NKI 0.6.0: "
                                                     "rg_partition_op and ReplicaGroup.from_partition_op arrive"):
            nki.collectives.rg_partition_op  # noqa: B018


# --- nl.fori_loop's induction value ------------------------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.language.fori_loop.html (i is an
# NkiScalar unless a bound is a VirtualRegister); NKI 0.6: always a VirtualRegister
# (https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/generated/nki.language.fori_loop.html)
def _prefix_copier(kinds):
    """A kernel: out[0, j] = data[0, j] for j < upper, the induction value used through NkiScalar arithmetic;
    `kinds` collects the induction value's type."""
    def copy_prefix(data, upper):
        n = data.shape[1]
        out = nl.ndarray((1, n), dtype=data.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=nl.zeros((1, n), dtype=nl.float32, buffer=nl.sbuf))
        temp = nl.ndarray((1, 1), dtype=nl.float32, buffer=nl.sbuf)

        def body(i):
            kinds.append(type(i).__name__)
            j = i * 2 - i + 0                      # NkiScalar arithmetic, a dynamic offset
            nisa.dma_copy(dst=temp, src=data.ap([[1, 1], [1, 1]], scalar_offset=j, indirect_dim=1))
            nisa.dma_copy(dst=out.ap([[1, 1], [1, 1]], scalar_offset=j, indirect_dim=1), src=temp)
        nl.fori_loop(0, upper, body)
        return out
    return nki.jit(copy_prefix)


def test_fori_loop_hands_an_nki_scalar_to_its_body_under_0_7():
    data = np.arange(1, 9, dtype=np.float32).reshape(1, 8)
    kinds = []
    with nki_versions.emulating("0.7"):
        got = _prefix_copier(kinds)(data, 3)
    assert got.tolist() == [[1, 2, 3, 0, 0, 0, 0, 0]] and set(kinds) == {"NkiScalar"}


def test_fori_loop_hands_a_register_when_a_bound_is_one_and_always_under_0_6():
    def register_bounded(x):
        kinds = []
        nl.fori_loop(0, nisa.register_alloc(2), lambda i: kinds.append(type(i).__name__))
        return kinds
    with nki_versions.emulating("0.7"):
        assert _inside_a_kernel(register_bounded) == ["VirtualRegister"] * 2
    with nki_versions.emulating("0.6"):
        with pytest.raises(NkiValidationError, match="a VirtualRegister's value exists only on device"):
            _prefix_copier([])(np.zeros((1, 8), np.float32), 3)


# --- nl.empty_like(x, ..., *, transpose_axes=, address=) --------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.language.empty_like.html
def test_empty_like_transpose_axes_permute_the_shape_for_a_dma_transpose():
    def shapes(x):
        like = [nl.ndarray(s, dtype=nl.bfloat16, buffer=nl.sbuf) for s in ((64, 128), (4, 8, 16), (2, 3, 5, 7))]
        made = [nl.empty_like(t, transpose_axes=axes) for t, axes in zip(like, ((1, 0), (2, 1, 0), (3, 1, 2, 0)))]
        placed = nl.empty_like(x=like[0], address=(0, 0))
        return [(t.shape, t.dtype, t.buffer.name) for t in made] + [placed.shape]
    with nki_versions.emulating("0.7"):
        assert _inside_a_kernel(shapes) == [((128, 64), nl.bfloat16, "sbuf"), ((16, 8, 4), nl.bfloat16, "sbuf"),
                                            ((7, 3, 5, 2), nl.bfloat16, "sbuf"), (64, 128)]


@pytest.mark.parametrize("make, words", [
    (lambda x: nl.empty_like(nl.ndarray((4, 8), nl.float32, nl.sbuf), transpose_axes=(0, 1)),
     r"transpose_axes=\(0, 1\) for a rank-2 tensor; the supported orders are \(1, 0\) \(rank 2\)"),
    (lambda x: nl.empty_like(nl.ndarray((4, 200), nl.float32, nl.sbuf), transpose_axes=(1, 0)),
     r"makes the source's free dim 1 \(size 200\) the partition dim, which holds at most 128"),
    (lambda x: nl.empty_like(x, transpose_axes=(1, 0)),
     r"transpose_axes prepares an SBUF destination for nisa.dma_transpose, got buffer 'private_hbm'"),
    (lambda x: nl.empty_like(x.shape), r"nl.empty_like: x must be an NkiTensor or a tile grid \(NkiTileGrid, "
                                       r"NkiBlockGrid\), got tuple"),
])
def test_empty_like_checks_its_0_7_arguments(make, words):
    with nki_versions.emulating("0.7"), pytest.raises(NkiValidationError, match=words):
        _inside_a_kernel(make)


def test_nki_0_6_empty_like_has_no_transpose_axes_or_address():
    with nki_versions.emulating("0.6"):
        assert _inside_a_kernel(lambda x: nl.empty_like(x=x).shape) == (4, 8)
        with pytest.raises(NkiArgumentError, match=r"nl.empty_like\(transpose_axes=, address=\) is not in NKI "
                                                   r"0.6.0: .*arrive with NKI 0.7"):
            _inside_a_kernel(lambda x: nl.empty_like(nl.ndarray((4, 8), nl.float32, nl.sbuf), transpose_axes=(1, 0)))


# --- nl.ndarray(address=) of an HBM tensor --------------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.language.ndarray.html (HBM: a
# 1-tuple (free_offset,)); https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/generated/
# nki.language.ndarray.html (one form, (partition_offset, free_offset))
@pytest.mark.parametrize("version, good, bad, form", [
    ("0.7", (0,), (0, 0), r"\(free_offset,\)"),
    ("0.6", (0, 16), (16,), r"\(partition_offset, free_offset\)"),
])
def test_an_hbm_address_has_the_form_of_its_version(version, good, bad, form):
    def hbm(address):
        return lambda x: nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.hbm, address=address).shape
    with nki_versions.emulating(version):
        assert _inside_a_kernel(hbm(good)) == (4, 8)
        for wrong in (bad, "junk", (-1,) * len(good)):
            with pytest.raises(NkiValidationError, match=f"nl.ndarray: the address of an HBM tensor in NKI "
                                                         f"{version}.0 is a tuple {form} of non-negative"):
                _inside_a_kernel(hbm(wrong))


# --- nl.zeros_like's buffer ----------------------------------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/generated/nki.language.zeros_like.html: buffer
# defaults to sbuf (no 2.33 page of zeros_like was found; the v2.33.0 nki.language index keeps its summary)
def test_zeros_like_of_an_hbm_tensor_is_in_sbuf(nki_version):
    made = _inside_a_kernel(lambda x: nl.zeros_like(x=x, dtype=nl.bfloat16))
    assert (made.shape, made.dtype, made.buffer.name) == ((4, 8), nl.bfloat16, "sbuf")


# --- nl.int64 ------------------------------------------------------------------------------------------
# https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/nki/api/generated/nki.language.fori_loop.html names
# nl.int64 (a 64-bit scalar cannot bound the loop); SDK 2.32's nki.language module (its API stubs) has no
# int64, its integer dtypes end at 32 bits
# What NKI 0.7 does with it (https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/ +
# nki.isa.scalar_load.html, nki.isa.scalar_store.html, nki.isa.NkiScalar.html): scalar_load / scalar_store take
# nl.int32 or nl.int64 ("Unlike the compute instructions, scalar_load accepts nl.int64"), a scalar's width is fixed
# when it is loaded, at 64 bits only + - * exist, an int64 scalar offsets HBM access patterns but not on-chip ones
# and cannot bound nl.fori_loop; dst of scalar_store "must have the same width as value".
_SCALAR_PAGES = "https://awsdocs-neuron.readthedocs-hosted.com/en/latest/nki/api/generated/nki.isa.scalar_load.html"


@nki.jit
def int64_offset_row(table, offset):
    """table[offset * 3 - 1] through an int64 scalar, and that scalar stored back."""
    held = nl.ndarray((1, 1), dtype=nl.int64, buffer=nl.sbuf)
    nisa.dma_copy(dst=held, src=offset)
    row_index = nisa.scalar_load(held) * 3 - 1
    row = nl.ndarray((1, table.shape[1]), dtype=table.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=row, src=table.ap([[table.shape[1], 1], [1, table.shape[1]]], scalar_offset=row_index))
    stored = nl.ndarray((1, 1), dtype=nl.int64, buffer=nl.sbuf)
    nisa.scalar_store(stored, row_index)
    out_row = nl.ndarray(row.shape, dtype=table.dtype, buffer=nl.shared_hbm)
    out_index = nl.ndarray((1, 1), dtype=nl.int64, buffer=nl.shared_hbm)
    nisa.dma_copy(dst=out_row, src=row)
    nisa.dma_copy(dst=out_index, src=stored)
    return out_row, out_index


def test_an_int64_scalar_is_loaded_computed_stored_and_offsets_hbm(nki_0_7):
    table = np.arange(16 * 8, dtype=np.float32).reshape(16, 8)
    row, index = int64_offset_row(table, np.array([[4]], np.int64))
    assert np.array_equal(np.asarray(row), table[11:12]) and np.asarray(index).dtype == np.int64
    assert np.asarray(index)[0, 0] == 11


def _scalar_of(dtype, value, then):
    """then(scalar) inside a kernel, the scalar loaded from a 1x1 SBUF tile of `dtype` holding `value`."""
    def body(x):
        t = nl.ndarray((1, 1), dtype=dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=value) if dtype == nl.int32 else nisa.dma_copy(dst=t, src=x)
        return then(nisa.scalar_load(t))
    got = []

    def kernel(x):
        got.append(body(x))
    nki.jit(kernel)(np.array([[value]], np.int64))
    return got[0]


def _stored(scalar):
    out = nl.ndarray((1, 1), dtype=scalar.dtype, buffer=nl.sbuf)
    nisa.scalar_store(out, scalar)
    return int(out.arr[0, 0])


def test_a_scalars_width_is_fixed_when_it_is_loaded(nki_0_7):
    # the NkiScalar page: "100000 * 100000 yields 1410065408"; "Load from an nl.int64 tile when a value needs more
    # range"
    assert _scalar_of(nl.int32, 100000, lambda i: _stored(i * 100000)) == 1410065408
    assert _scalar_of(nl.int64, 100000, lambda i: _stored(i * 100000)) == 10**10
    with pytest.raises(NkiValidationError, match="an int64 and an int32 scalar; the operands' dtypes must match"):
        _scalar_of(nl.int64, 1, lambda i: i + nisa.scalar_load(nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)))


@pytest.mark.parametrize("use, match", [
    (lambda i: i < 3, "comparisons of nl.int64 scalars are rejected at compile time"),
    (lambda i: nl.fori_loop(0, i, lambda j: None), "an nl.int64 NkiScalar cannot bound the loop"),
    (lambda i: nl.ndarray((4, 8), dtype=nl.float32, buffer=nl.sbuf).ap([[8, 4], [1, 1]], scalar_offset=i,
                                                                       indirect_dim=1),
     "on an sbuf operand the offset must be nl.int32"),
    (lambda i: nisa.scalar_store(nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf), i),
     "dst dtype int32 for an int64 scalar; scalar_store writes a scalar into a 1x1 tile of its own width"),
])
def test_what_an_int64_scalar_cannot_do(nki_0_7, use, match):
    with pytest.raises(NkiValidationError, match=match):
        _scalar_of(nl.int64, 2, use)


@pytest.mark.parametrize("use, match", [
    (lambda t: nisa.memset(dst=t, value=0), r"dst is an nl.int64 tensor; only nisa.dma_copy and nisa.scalar_load"),
    (lambda t: nisa.tensor_copy(dst=nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf), src=t),
     r"src is an nl.int64 tensor"),
    (lambda t: nisa.dma_copy(dst=nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf), src=t),
     "src dtype int64 != dst dtype int32: a casting DMA goes through fp32"),
    (lambda t: nisa.register_load(nisa.register_alloc(), t), "register_load: src is an nl.int64 tensor"),
])
def test_int64_tiles_are_moved_not_computed_on(nki_0_7, use, match):
    # "Unlike the compute instructions, scalar_load accepts nl.int64" (scalar_load page); register_load: "any
    # NKI dtype up to 32 bits" (v2.33.0 register_load page)
    with pytest.raises(NkiValidationError, match=match):
        _inside_a_kernel(lambda x: use(nl.ndarray((1, 1), dtype=nl.int64, buffer=nl.sbuf)))


def test_nki_0_6_has_no_int64(nki_0_6):
    with pytest.raises(NkiRemovedApiError, match=r"nki.language.int64 is not in NKI 0.6.0: nl.int64 arrives with "
                                                 r"NKI 0.7; NKI 0.6's integer dtypes end at 32 bits"):
        nl.int64  # noqa: B018
