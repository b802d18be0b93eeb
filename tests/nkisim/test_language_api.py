"""nki.language APIs beyond the element-wise callables, against numpy references (semantics from
each API's page under https://awsdocs-neuron.readthedocs-hosted.com/en/v2.32.0/nki/api/)."""
import warnings
from dataclasses import dataclass

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest

from nkisim import NkiArgumentError, NkiValidationError

from helpers import rand


def run_nl(body, *arrays):
    """Load arrays into SBUF, apply body (nl.* calls) to the tiles, store the returned tile."""

    @nki.jit
    def kernel(*xs):
        tiles = [nl.load(x) for x in xs]
        result = body(*tiles)
        out = nl.ndarray(result.shape, dtype=result.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=result)
        return out

    return kernel(*arrays)


X = rand((128, 64), seed=1)


def test_large_broadcast_to_copies_without_a_torch_warning():
    # >= 256 KiB takes the threaded copy; the broadcast source is a read-only numpy view
    row = rand((1, 1024), seed=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = run_nl(lambda t: nl.broadcast_to(t, (128, 1024)), row)
    np.testing.assert_array_equal(got, np.broadcast_to(row, (128, 1024)))


def test_broadcast_to_repeats_free_and_partition_dims():
    row = rand((1, 32), seed=2)
    np.testing.assert_array_equal(run_nl(lambda t: nl.broadcast_to(t, (128, 32)), row), np.broadcast_to(row, (128, 32)))
    col = rand((128, 1), seed=3)
    np.testing.assert_array_equal(run_nl(lambda t: nl.broadcast_to(t, (128, 16)), col), np.broadcast_to(col, (128, 16)))


def test_broadcast_to_takes_a_psum_source():
    """"x - the source tile in SBUF or PSUM" (nl.broadcast_to's page): a PSUM column, e.g. a matmul result."""
    def body(t):
        col = nl.ndarray((8, 1), dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=col, src=t)
        return nl.broadcast_to(col, (8, 6))

    col = rand((8, 1), seed=5)
    np.testing.assert_array_equal(run_nl(body, col), np.broadcast_to(col, (8, 6)))


def test_matmul_names_an_operand_that_is_not_on_sbuf():
    """nl.matmul's page: "x: a tile on SBUF", "y: a tile on SBUF"."""
    @nki.jit
    def from_hbm(a, b):
        return nl.matmul(a, nl.load(b), transpose_x=True)

    with pytest.raises(NkiValidationError, match="nl.matmul: x is in private_hbm; x and y are tiles on SBUF"):
        from_hbm(rand((32, 16)), rand((32, 24)))


def test_broadcast_to_same_shape_returns_the_tile_and_rejects_other_ranks():
    seen = {}
    record = seen.__setitem__

    def body(t):
        record("same", nl.broadcast_to(t, t.shape) == t)
        return t

    run_nl(body, X)
    assert seen["same"]
    with pytest.raises(NkiValidationError, match="cannot broadcast"):
        run_nl(lambda t: nl.broadcast_to(t, (128, 64, 2)), X)


@pytest.mark.parametrize("axis", [[1], (1,), 1, -1])
def test_reductions_accept_an_int_tuple_or_list_axis(axis):
    np.testing.assert_allclose(run_nl(lambda t, axis=axis: nl.sum(t, axis=axis), X)[:, 0], X.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_list_axis_over_two_trailing_dims_of_an_access_pattern():
    """The docs' max-pool example: nl.max over axis=[3, 4] of a 5-D .ap() view."""
    x = np.arange(2 * 6 * 6, dtype=np.float32).reshape(2, 6, 6)

    def body(t):
        pool = t.ap([[36, 2], [12, 3], [2, 3], [6, 2], [1, 2]])
        return nl.max(pool, axis=[3, 4])

    got = run_nl(body, x)
    np.testing.assert_array_equal(got, x.reshape(2, 3, 2, 3, 2).max(axis=(2, 4)))


def test_prod_all_var():
    small = rand((128, 8), seed=4, lo=0.5, hi=1.5)
    np.testing.assert_allclose(run_nl(lambda t: nl.prod(t, axis=1), small)[:, 0], small.prod(axis=1), rtol=1e-5)
    flags = (rand((128, 8), seed=5) > -2.5).astype(np.float32)
    np.testing.assert_array_equal(run_nl(lambda t: nl.all(t, axis=[1]), flags)[:, 0], flags.all(axis=1))
    got = run_nl(lambda t: nl.var(t, axis=1), X)
    assert got.shape == (128, 1)                      # documented: keepdims shape always
    np.testing.assert_allclose(got[:, 0], X.var(axis=1), rtol=1e-4, atol=1e-5)


def test_softmax_and_rms_norm():
    got = run_nl(lambda t: nl.softmax(t, axis=1), X)
    e = np.exp(X - X.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=1e-5, atol=1e-7)
    w = rand((128, 64), seed=6)
    got = run_nl(lambda t, u: nl.rms_norm(t, u, axis=1, n=64), X, w)
    want = X / np.sqrt((X * X).mean(axis=1, keepdims=True) + 1e-6) * w
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_softmax_and_rms_norm_along_the_last_dims_of_a_3d_tile():
    """Their axes "can only be the last contiguous dim(s) of the tile" (the nl.softmax page): of [P, A, B],
    axis 2 alone (also the default -1) normalises each [P, B] block, [1, 2] all of P's free elements; axis 1
    alone is not the last dims and is refused with the rule."""
    x = rand((128, 3, 16), seed=7)
    for axis in (2, -1):
        got = run_nl(lambda t: nl.softmax(t, axis=axis), x)
        e = np.exp(x - x.max(axis=2, keepdims=True))
        np.testing.assert_allclose(got, e / e.sum(axis=2, keepdims=True), rtol=1e-5, atol=1e-7)
    got = run_nl(lambda t: nl.softmax(t, axis=[1, 2]), x)
    e = np.exp(x - x.max(axis=(1, 2), keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=(1, 2), keepdims=True), rtol=1e-5, atol=1e-7)
    w = rand((128, 3, 16), seed=8)
    got = run_nl(lambda t, u: nl.rms_norm(t, u, axis=2, n=16), x, w)
    np.testing.assert_allclose(got, x / np.sqrt((x * x).mean(axis=2, keepdims=True) + 1e-6) * w, rtol=1e-5, atol=1e-6)
    with pytest.raises(NkiValidationError, match=r"nl\.softmax: axis 1 must be the last contiguous free dim\(s\) "
                                                 r"of the \(128, 3, 16\) tile, e\.g\. 2 or \[1, 2\]"):
        run_nl(lambda t: nl.softmax(t, axis=1), x)
    with pytest.raises(NkiValidationError, match=r"nl\.rms_norm: axis 0 must be the last contiguous free dim"):
        run_nl(lambda t, u: nl.rms_norm(t, u, axis=0, n=128), x, w)
    with pytest.raises(NkiValidationError, match=r"nl\.softmax: axis \[\] must be the last contiguous free dim"):
        run_nl(lambda t: nl.softmax(t, axis=[]), x)


def test_softmax_uniform_input_is_uniform():
    """The page's example: a constant tile gives 1/F everywhere."""
    got = run_nl(lambda t: nl.softmax(t, axis=1), np.ones((128, 512), np.float32))
    np.testing.assert_allclose(got, np.full((128, 512), 1 / 512, np.float32), rtol=1e-6)


def test_negative_logical_not_expand_dims():
    np.testing.assert_array_equal(run_nl(nl.negative, X), -X)
    bits = (X > 0).astype(np.float32)
    np.testing.assert_array_equal(run_nl(nl.logical_not, bits), 1 - bits)
    got = run_nl(lambda t: nl.copy(nl.expand_dims(t, 1)), X)
    np.testing.assert_array_equal(got, X[:, None, :])


def test_shared_constant_is_a_shared_hbm_tensor_with_the_data():
    const = np.arange(12, dtype=np.int32).reshape(3, 4)

    @nki.jit
    def kernel(x):
        c = nl.shared_constant(const)
        assert c.buffer == nl.shared_hbm
        out = nl.ndarray(c.shape, dtype=c.dtype, buffer=nl.shared_hbm)
        t = nl.load(c)
        nl.store(out, value=t)
        return out

    np.testing.assert_array_equal(kernel(X), const)


@pytest.mark.parametrize("dtype", ["int64", "bool"])
def test_shared_constant_refuses_element_types_its_page_does_not_list(dtype):
    # v2.33.0 nki.language.shared_constant: "Supported element types: float32, float16, bfloat16, int32, ..."
    const = np.zeros((2, 4), dtype=dtype)

    @nki.jit
    def kernel(x):
        return nl.shared_constant(const)

    with pytest.raises(NkiValidationError, match=f"nl.shared_constant: element type {dtype}.* supported ones are "
                                                  "float32, float16, bfloat16, int32, int16, int8, uint32"):
        kernel(X)


def test_shared_identity_matrix_takes_the_shared_constant_element_types():
    # its page: "the same behavior" as shared_constant
    @nki.jit
    def kernel(x, dtype):
        out = nl.ndarray((4, 4), dtype=dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.shared_identity_matrix(4, dtype=dtype))
        return out

    np.testing.assert_array_equal(kernel(X, nl.float32), np.eye(4, dtype=np.float32))
    with pytest.raises(NkiValidationError, match="nl.shared_identity_matrix: element type bool"):
        kernel(X, nl.bool_)


def test_where_takes_x_where_the_condition_is_one():
    cond = (rand((128, 16), seed=7) > 0).astype(np.float32)
    x, y = rand((128, 16), seed=8), rand((128, 16), seed=9)
    np.testing.assert_array_equal(run_nl(nl.where, cond, x, y), np.where(cond != 0, x, y))
    np.testing.assert_array_equal(run_nl(lambda c, a: nl.where(c, a, 0.0), cond, x), np.where(cond != 0, x, 0))


def test_gather_flattened_gathers_within_each_partition():
    data = rand((128, 4, 8), seed=10)
    idx = np.random.default_rng(11).integers(0, 32, size=(128, 16)).astype(np.int32)
    want = np.take_along_axis(data.reshape(128, 32), idx, axis=1)
    np.testing.assert_array_equal(run_nl(nl.gather_flattened, data, idx), want)
    with pytest.raises(NkiValidationError, match="axis=1"):
        run_nl(lambda d, i: nl.gather_flattened(d, i, axis=1), data, idx)


def test_shared_identity_matrix_in_a_new_tile_or_dst():
    np.testing.assert_array_equal(run_nl(lambda t: nl.shared_identity_matrix(n=128, dtype=nl.float32), X),
                                  np.eye(128, dtype=np.float32))

    def into_dst(t):
        dst = nl.ndarray((64, 64), dtype=nl.bfloat16, buffer=nl.sbuf)
        assert nl.shared_identity_matrix(64, nl.bfloat16, dst=dst) == dst
        return dst

    np.testing.assert_array_equal(run_nl(into_dst, X).astype(np.float32), np.eye(64, dtype=np.float32))


def test_memory_queries_types_and_ordering():
    assert nl.is_sbuf(nl.sbuf) and nl.is_psum(nl.psum) and nl.is_on_chip(nl.psum)
    assert nl.is_hbm(nl.hbm) and nl.is_hbm(nl.shared_hbm) and not nl.is_on_chip(nl.private_hbm)
    assert nl.MemoryRegion.sbuf is nl.sbuf and nl.MemoryRegion.shared_hbm is nl.shared_hbm
    # "class nki.language.MemoryRegion(Enum)"; "nki.language.hbm = MemoryRegion.private_hbm" (their pages)
    assert list(nl.MemoryRegion) == [nl.sbuf, nl.psum, nl.private_hbm, nl.shared_hbm]
    assert nl.sbuf.value == "sbuf" and nl.MemoryRegion("shared_hbm") is nl.shared_hbm and nl.hbm is nl.private_hbm
    assert isinstance(nl.float32, nl.DType) and isinstance(nl.bfloat16, nki.dtype)
    with pytest.raises(NkiValidationError, match="expected a buffer"):
        nl.is_sbuf("sbuf")

    def body(t):
        with nl.no_reorder():
            return nl.add(t, t)

    np.testing.assert_array_equal(run_nl(body, X), X + X)


def test_nkiobject_is_a_dataclass_base():
    @dataclass
    class Config(nl.NKIObject):
        tile: int
        dtype: object = nl.bfloat16

    cfg = Config(tile=128)
    assert isinstance(cfg, nl.NKIObject) and cfg.tile == 128 and cfg.dtype is nl.bfloat16
    assert nl.NKIObject(a=1).a == 1

    @dataclass
    class Params(nl.NKIObject):
        index = None        # declared without an annotation: not a dataclass field
        offset = None

    p = Params(index=3, offset=7)
    assert (p.index, p.offset) == (3, 7) and Params().index is None
    with pytest.raises(TypeError):
        Params(undeclared=1)


def test_nki_0_6_compiles_a_class_without_dataclass_like_one_with_it(nki_0_6):
    """The 2.32 language guide (Class Support): "classes with and without the @dataclass decorator will be compiled
    in the same way", with a generated `__init__(self, x = None, y = False)` and `__post_init__`."""
    class C(nl.NKIObject):
        x: int
        y: bool = False

        def toggle(self):
            self.y = not self.y

    class D(C):
        z: float = 2.0

        def __post_init__(self):
            self.w = self.x * 2

    c = C(1)
    c.toggle()
    assert (c.x, c.y) == (1, True) and C().x is None
    d = D(3, z=5.0)
    assert (d.x, d.y, d.z, d.w) == (3, False, 5.0, 6)
    with pytest.raises(NkiArgumentError, match=r"C\(\): 3 positional arguments for 2 fields \['x', 'y'\]"):
        C(1, 2, 3)


def test_engine_aliases_and_constants_module():
    assert nisa.vector_engine is nisa.engine.vector and nisa.scalar_engine is nisa.engine.scalar
    assert nisa.gpsimd_engine is nisa.engine.gpsimd and nisa.tensor_engine is nisa.engine.tensor
    assert nisa.unknown_engine is nisa.engine.unknown
    from nki.isa.constants import dge_mode, oob_mode
    assert oob_mode is nisa.oob_mode and dge_mode is nisa.dge_mode


def test_typing_annotations():
    import nki.typing as nt

    @nki.jit
    def kernel(x: nt.tensor[128, 64]):
        return x

    assert "128, 64" in repr(nt.tensor[128, 64])
    np.testing.assert_array_equal(kernel(X), X)


def test_documented_but_not_emulated_apis_raise_a_clear_error():
    stand_in = nl.tfloat32                # importable, so a module using it loads
    with pytest.raises(NkiValidationError, match=r"nki.language.tfloat32 is not emulated by nkisim: .*not documented"):
        stand_in.name  # noqa: B018
    with pytest.raises(NkiValidationError, match="nki.isa.get_nc_sub_version is not emulated"):
        nisa.get_nc_sub_version()
    with pytest.raises(AttributeError):
        nl.no_such_api  # noqa: B018


def test_tile_size_has_every_documented_constant():
    from nkisim.api_surface import DOCUMENTED

    for name in DOCUMENTED["nki.language.tile_size"]:
        assert isinstance(getattr(nl.tile_size, name), int)
    assert nl.tile_size.sbuf_fmax * 4 == nl.tile_size.sbuf_fmax_bytes
    # "Total SBUF capacity ... (all partitions combined)": NeuronCore-v3's 28 MiB, not 128 x the usable bytes
    assert nl.tile_size.sbuf_size_bytes == 28 * 2**20 > nl.tile_size.pmax * nl.tile_size.sbuf_fmax_bytes


def test_device_print_prints_now_and_needs_a_constant_string_prefix(capsys):
    @nki.jit
    def show(x, prefix):
        t = nl.load(x)
        nl.device_print(prefix, t)

    show(np.full((2, 3), 7, np.float32), "tile:")
    assert capsys.readouterr().out.startswith("tile: [[7. 7. 7.]")
    with pytest.raises(NkiValidationError, match="print_prefix must be a constant string, got int 123"):
        show(np.zeros((2, 3), np.float32), 123)

    @nki.jit
    def show_psum(x):
        t = nl.ndarray((2, 3), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=t, value=1.0)
        nl.device_print("psum:", t)

    with pytest.raises(NkiValidationError, match="in PSUM; it can be in SBUF or HBM"):   # its page
        show_psum(np.zeros((2, 3), np.float32))


def test_device_print_takes_its_parameters_by_the_pages_names(capsys):
    """nl.device_print's page: `device_print(print_prefix, tensor)`; a kernel may pass both by keyword."""
    @nki.jit
    def show(x):
        t = nl.load(x)
        nl.device_print(print_prefix="by keyword:", tensor=t)

    show(np.full((1, 2), 3, np.float32))
    assert capsys.readouterr().out.startswith("by keyword: [[3. 3.]]")


def test_memset_rounds_an_fp32_literal_just_past_float32_max():
    """nki-library's FLOAT32_MIN literal -3.4028235e38 rounds to -FLT_MAX in fp32, as on hardware."""

    @nki.jit
    def kernel(x):
        t = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=-3.4028235e38)
        out = nl.ndarray((128, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        return out

    np.testing.assert_array_equal(kernel(X), np.full((128, 4), np.finfo(np.float32).min, np.float32))


# --- nl functions outside the ISA tables (floor, ceil, trunc, mod, fmod, cos, tan) -----------------
HALVES = np.array([[-3.7, -2.5, -0.5, -0.0, 0.5, 2.5, 3.7, 7.0]] * 4, dtype=np.float32)
DIVISORS = np.array([[2.0, -2.0, 3.0, 1.5, -1.5, 2.0, -3.0, 2.5]] * 4, dtype=np.float32)


@pytest.mark.parametrize("name", ["floor", "ceil", "trunc", "cos", "tan"])
def test_unary_nl_functions_outside_the_isa_tables_match_numpy(name):
    got = run_nl(lambda t: getattr(nl, name)(t), HALVES)
    np.testing.assert_allclose(got, getattr(np, name)(HALVES), rtol=1e-6, atol=1e-7)
    if name != "cos":   # -0.5 -> -0.0 (ceil, trunc): the sign of zero is numpy's too
        np.testing.assert_array_equal(np.signbit(got), np.signbit(getattr(np, name)(HALVES)))


@pytest.mark.parametrize("name", ["mod", "fmod"])
def test_mod_takes_the_divisors_sign_and_fmod_the_dividends(name):
    fn, ref = getattr(nl, name), getattr(np, name)
    np.testing.assert_allclose(run_nl(fn, HALVES, DIVISORS), ref(HALVES, DIVISORS), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(run_nl(lambda t: fn(t, 2.5), HALVES), ref(HALVES, 2.5), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(run_nl(lambda t: fn(-7.0, t), DIVISORS), ref(-7.0, DIVISORS), rtol=1e-6, atol=1e-6)


def test_nl_functions_outside_the_isa_tables_lower_to_one_labelled_instruction_each():
    import nkisim

    @nki.jit
    def kernel(x, y):
        a, b = nl.load(x), nl.load(y)
        out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
        nl.store(out, nl.add(nl.add(nl.floor(a), nl.mod(a, b)), nl.cos(a)))
        return out

    lowered = {i.attrs["via"]: (i.opcode, i.engine) for i in nkisim.run(kernel, HALVES, DIVISORS).trace.instructions
               if i.attrs.get("via") in ("nl.floor", "nl.mod", "nl.cos")}
    assert lowered == {"nl.floor": ("TENSOR_SCALAR", "Vector"), "nl.mod": ("TENSOR_TENSOR", "Vector"),
                       "nl.cos": ("ACTIVATE", "Scalar")}


@pytest.mark.parametrize("call", [
    lambda t, o: nisa.activation(dst=o, op=nl.cos, data=t),
    lambda t, o: nisa.tensor_scalar(dst=o, data=t, op0=nl.floor, operand0=None),
    lambda t, o: nisa.tensor_tensor(dst=o, data1=t, data2=t, op=nl.fmod),
])
def test_nl_functions_outside_the_isa_tables_are_not_isa_operators(call):
    def body(t):
        out = nl.ndarray(t.shape, dtype=t.dtype, buffer=nl.sbuf)
        call(t, out)
        return out

    with pytest.raises(NkiValidationError, match=r"is an nki.language function, not an operator of the ISA's ALU or "
                                                 r"activation tables .*call nl\.\w+\(\.\.\.\) on the tile instead"):
        run_nl(body, HALVES)


def test_nl_sin_reduces_its_argument_first_and_stays_accurate_outside_minus_pi_pi():
    # "nki.language.sin applies additional instructions to perform range reduction before the
    # activation, so it stays accurate over the full input domain" (nki.api.shared, activation table);
    # only nisa.activation(op=nl.sin) has the [-pi, pi] valid range (NaN and a warning outside it here)
    import warnings

    x = np.array([[9.0, -9.0, 0.0, 3.2, -3.2, 100.0, -1234.5, 1e4, np.pi, -np.pi]] * 2, np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")          # no input of the activation is outside its range
        got = run_nl(nl.sin, x)
    expected = np.sin(x.astype(np.float64))
    assert got[0, 0] == pytest.approx(0.41211848, abs=1e-6)      # not NaN, not the polynomial's 27.65
    assert np.all(np.abs(got - expected) <= np.abs(x) * 2.0**-23 + 2.0**-22)
    np.testing.assert_allclose(run_nl(nl.cos, x), np.cos(x.astype(np.float64)), atol=1e-6)


def test_nl_sin_lowers_to_a_reduction_then_the_activation():
    @nki.jit
    def k(x):
        t = nl.load(x)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.sin(t))
        return out

    import nkisim
    trace = nkisim.run(k, np.zeros((128, 4), np.float32)).trace
    assert [(i.isa, i.engine) for i in trace if i.isa != "dma_copy"] == [("tensor_scalar", "Vector"),
                                                                         ("activation", "Scalar")]
