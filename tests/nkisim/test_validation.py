"""One test per validation rule: the error type, and a message naming the instruction, operand,
value and limit, ending with the kernel source line."""
import re
import sys

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
import torch

from nkisim import NkiValidationError


def fails(body, match, *, error=NkiValidationError, x=None):
    """Run `body(x, big, t, col, ps)` in a kernel; assert it raises `error` matching `match`."""

    @nki.jit
    def k(x):
        big = nl.ndarray((256, 8), dtype=nl.float32, buffer=nl.sbuf)
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        col = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        ps = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum)
        body(x, big, t, col, ps)

    with pytest.raises(error, match=match) as info:
        k(np.zeros((128, 8), np.float32) if x is None else x)
    return str(info.value)


LINE = r"\(test_validation\.py:\d+\)$"


def test_partition_dim_over_128_names_instruction_operand_limit_and_line():
    msg = fails(lambda x, big, t, col, ps: nisa.tensor_tensor(dst=big, data1=big, data2=big, op=nl.add),
                "tensor_tensor: dst partition dimension 256 exceeds maximum 128")
    assert re.search(LINE, msg)


@nki.jit
def bad_kernel(x):
    big = nl.ndarray((256, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.activation(dst=big, op=nl.exp, data=big)


def test_error_is_an_assertion_error_and_traceback_ends_in_the_kernel():
    with pytest.raises(AssertionError) as info:
        bad_kernel(np.zeros((2, 2), np.float32))
    assert isinstance(info.value, NkiValidationError)
    frames = [entry.path.name for entry in info.traceback]
    assert frames[-1] == "test_validation.py" and "isa.py" not in frames
    activation_line = bad_kernel.fn.__code__.co_firstlineno + 3   # decorator, def, ndarray, activation
    assert info.traceback[-1].lineno + 1 == activation_line
    assert str(info.value).endswith(f"(test_validation.py:{activation_line})")


@pytest.mark.parametrize("body, match", [
    (lambda x, big, t, col, ps: nisa.tensor_tensor(dst=t, data1=t, data2=t[0:64], op=nl.add),
     "data2 has 64 partitions but dst has 128"),
    (lambda x, big, t, col, ps: nisa.tensor_tensor(dst=t, data1=t, data2=t[:, 0:4], op=nl.add),
     "data2 has 4 elements per partition but dst has 8"),
    (lambda x, big, t, col, ps: nisa.activation(dst=t[:, 0:4], op=nl.exp, data=t),
     "activation: data has 8 elements per partition but dst has 4"),
])
def test_partition_and_free_sizes_must_match(body, match):
    fails(body, match)


def test_compute_operands_must_be_on_chip():
    fails(lambda x, big, t, col, ps: nisa.activation(dst=t, op=nl.exp, data=x), "activation: data is in private_hbm")


def test_psum_is_not_a_dma_source():
    fails(lambda x, big, t, col, ps: nisa.dma_copy(dst=x, src=ps), "dma_copy: src is in psum; PSUM is not a DMA source")


def test_tensor_tensor_inputs_not_both_psum():
    fails(lambda x, big, t, col, ps: nisa.tensor_tensor(dst=t, data1=ps, data2=ps, op=nl.add),
          "data1 and data2 are both in psum")


def test_dma_element_counts_must_match():
    fails(lambda x, big, t, col, ps: nisa.dma_copy(dst=t, src=x[0:64]),
          r"src has 512 elements \(64, 8\) but dst has 1024")


def test_tensor_scalar_tile_operand_must_be_fp32_column():
    def body(x, big, t, col, ps):
        bf = nl.ndarray((128, 1), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=bf)
    fails(body, "tensor_scalar: operand0 tile must be float32, got bfloat16")
    fails(lambda x, big, t, col, ps: nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=t),
          r"operand0 must be a \[128, 1\] tile .* got shape \(128, 8\)")


def test_tensor_scalar_op1_and_operand1_go_together():
    fails(lambda x, big, t, col, ps: nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0, operand1=2.0),
          "operand1 is set but op1 is None")


def test_activation_bias_tile_free_size_must_be_1():
    fails(lambda x, big, t, col, ps: nisa.activation(dst=t, op=nl.exp, data=t, bias=t[:, 0:2]),
          r"activation: bias must be a \[128, 1\] tile .* its free size must be 1")


@pytest.mark.parametrize("reduce_op, spelled", [(nl.maximum, "nl.maximum"), (nl.max, "nl.max")])
def test_reduce_op_must_be_add(reduce_op, spelled):
    # nl.max is a Python function standing for the maximum operator: the error names it as the kernel wrote it
    fails(lambda x, big, t, col, ps: nisa.activation_reduce(dst=t, op=nl.copy, data=t, reduce_op=reduce_op,
                                                            reduce_res=col),
          rf"activation_reduce: reduce_op must be nl.add on trn2, got {spelled} \(")


def test_op1_without_operand1_names_the_operator_as_written():
    fails(lambda x, big, t, col, ps: nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0, op1=nl.max),
          "tensor_scalar: op1=nl.max is set but operand1 is None")


@pytest.mark.parametrize("body, match", [
    (lambda x, big, t, col, ps: nisa.dma_copy(dst=t, src=x, dge_mode=3),
     "dma_copy: dge_mode must be a nki.isa.dge_mode member .* got int 3: raw integer enum constants are no longer "
     "accepted since NKI 0.3.0 .* write nisa.dge_mode.none"),
    (lambda x, big, t, col, ps: nisa.activation(dst=t, op=nl.exp, data=t, reduce_cmd=1),
     "reduce_cmd must be a nki.isa.reduce_cmd member"),
    (lambda x, big, t, col, ps: nisa.tensor_tensor(dst=t, data1=t, data2=t, op="add"),
     "op must be an nki.language operator such as nl.add, got str 'add'"),
    (lambda x, big, t, col, ps: nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.softmax),
     r"op must be an nki.language operator such as nl.add, got function nl.softmax \("),
])
def test_enum_and_operator_arguments_must_be_the_real_objects(body, match):
    fails(body, match)


def test_unknown_keyword_argument_is_a_type_error():
    fails(lambda x, big, t, col, ps: nisa.activation(dst=t, op=nl.exp, data=t, mask=None),
          "unexpected keyword argument 'mask'", error=TypeError)


def test_dma_engine_only_with_hwdge_and_only_sync_or_scalar():
    fails(lambda x, big, t, col, ps: nisa.dma_copy(dst=t, src=x, engine=nisa.engine.sync),
          "engine=nisa.engine.sync is only valid with dge_mode=nisa.dge_mode.hwdge")
    fails(lambda x, big, t, col, ps: nisa.dma_copy(dst=t, src=x, dge_mode=nisa.dge_mode.hwdge,
                                                   engine=nisa.engine.gpsimd),
          "triggered from nisa.engine.sync or nisa.engine.scalar")


def test_hwdge_requires_equal_dtypes():
    def body(x, big, t, col, ps):
        bf = nl.ndarray((128, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.dma_copy(dst=bf, src=x, dge_mode=nisa.dge_mode.hwdge)
    fails(body, "dge_mode=hwdge copies raw bytes, src dtype float32 != dst dtype bfloat16")


def test_scalar_engine_tensor_scalar_op_pairs():
    fails(lambda x, big, t, col, ps: nisa.tensor_scalar(dst=t, data=t, op0=nl.subtract, operand0=1.0,
                                                        engine=nisa.engine.scalar),
          r"Scalar engine supports only .* got \('subtract', None\)")
    fails(lambda x, big, t, col, ps: nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0,
                                                        engine=nisa.engine.gpsimd),
          "engine=nisa.engine.gpsimd is only allowed for nl.rsqrt")


def test_activation_op_must_be_in_the_table_and_engines_checked():
    fails(lambda x, big, t, col, ps: nisa.activation(dst=t, op=nl.subtract, data=t),
          "op=nl.subtract is not an activation function")
    fails(lambda x, big, t, col, ps: nisa.memset(dst=t, value=0.0, engine=nisa.engine.scalar),
          "memset runs on nisa.engine.vector, nisa.engine.gpsimd")
    fails(lambda x, big, t, col, ps: nisa.tensor_copy(dst=t, src=ps, engine=nisa.engine.gpsimd),
          "GpSimd cannot access PSUM")


def test_memset_of_an_integer_tile_needs_an_integral_value():
    def body(x, big, t, col, ps):
        i = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=i, value=0.5)
    fails(body, "memset: value 0.5 is not a whole number but dst dtype is int32")


def test_tensor_reduce_axis_rules():
    fails(lambda x, big, t, col, ps: nisa.tensor_reduce(dst=col, op=nl.add, data=t, axis=0),
          "axis 0 is the partition dim")

    def middle(x, big, t, col, ps):
        t3 = nl.ndarray((128, 4, 8), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_reduce(dst=t, op=nl.add, data=t3, axis=1)
    fails(middle, r"axis=1 must be the trailing free dims of the 3-D data")
    fails(lambda x, big, t, col, ps: nisa.tensor_reduce(dst=t, op=nl.add, data=t, axis=1),
          "dst has 8 elements per partition but reducing axes")


def test_free_size_limit_per_instruction():
    def body(x, big, t, col, ps):
        wide = nl.ndarray((128, 70000), dtype=nl.bfloat16, buffer=nl.sbuf)
        nisa.activation(dst=wide, op=nl.exp, data=wide)
    fails(body, "dst free size 70000 elements per partition exceeds maximum 65536")


def test_string_buffer_and_unsupported_dtype_are_rejected():
    fails(lambda x, big, t, col, ps: nl.ndarray((128, 8), dtype=nl.float32, buffer="sbuf"),
          "nl.ndarray: buffer must be one of nl.sbuf")
    fails(lambda x, big, t, col, ps: nl.ndarray((128, 8), dtype=np.float64, buffer=nl.sbuf),
          "dtype .*float64.* is not an NKI dtype")


def test_nl_divide_callable_is_rejected_and_unemulated_apis_say_so():
    fails(lambda x, big, t, col, ps: nl.divide(t, t), "nl.divide is not supported on hardware")
    fails(lambda x, big, t, col, ps: nisa.get_nc_sub_version(), "nki.isa.get_nc_sub_version is not emulated by nkisim")


def test_kernel_outputs_must_be_shared_hbm():
    @nki.jit
    def k(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)
        nisa.dma_copy(dst=out, src=x)
        return out

    with pytest.raises(NkiValidationError, match=r"kernel 'k' returns an unnamed \[2, 2\] tensor, which is in "
                                                 r"private_hbm; kernel outputs must be allocated with "
                                                 r"buffer=nl.shared_hbm \(https://\S+/v2.32.0/nki/migration/index.html, "
                                                 r"'Output tensors must use nl.shared_hbm'\) \(test_validation.py:\d+\)"):
        k(np.zeros((2, 2), np.float32))

    @nki.jit
    def named(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf, name="result")
        nisa.dma_copy(dst=out, src=x)
        return out

    with pytest.raises(NkiValidationError, match=r"kernel 'named' returns 'result', which is in sbuf"):
        named(np.zeros((2, 2), np.float32))


@pytest.mark.parametrize("lnc", [0, 3, 8, "2"])
def test_lnc_must_be_1_or_2(lnc):
    @nki.jit
    def k(x):
        return None

    with pytest.raises(NkiValidationError, match=r"NCC_EARG001 .* trn2 supports LNC 1 or 2"):
        k[lnc](np.zeros(1, np.float32))


def test_list_arguments_keyword_only_params_and_no_arguments():
    @nki.jit
    def k(x):
        return None

    with pytest.raises(NkiValidationError, match="is a list; NKI kernels take tuples"):
        k([np.zeros(1, np.float32)])
    with pytest.raises(NkiValidationError, match="called with no arguments"):
        k()
    with pytest.raises(NkiValidationError, match="keyword-only parameters"):
        nki.jit(lambda x, *, y: None)


def test_a_host_array_inside_a_dict_or_dataclass_argument_is_refused_at_the_launch():
    """Not a device tensor: the kernel would fail later with an error naming neither the argument nor the cause."""
    import dataclasses

    @dataclasses.dataclass
    class Params:
        scale: float
        weight: object

    @nki.jit
    def k(x, params):
        return x

    x = np.zeros((2, 2), np.float32)
    with pytest.raises(NkiValidationError, match=r"kernel argument 1 holds a numpy.ndarray at 1\['w'\]; nkisim makes "
                                                 r"device tensors of a kernel's array arguments and the arrays in tuple"):
        k(x, {"w": x})
    with pytest.raises(NkiValidationError, match=r"kernel argument params holds a torch.Tensor at params.weight"):
        k(x, params=Params(1.0, torch.zeros(2)))
    np.testing.assert_array_equal(k(x, {"scale": 2.0}), x)        # plain values in a dict are compile-time constants


def test_instructions_outside_a_kernel_are_rejected():
    with pytest.raises(NkiValidationError, match="nl.ndarray called outside a running NKI kernel"):
        nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)


def test_target_other_than_trn2_is_rejected(monkeypatch):
    monkeypatch.setenv("NEURON_PLATFORM_TARGET_OVERRIDE", "trn3")
    with pytest.raises(NkiValidationError, match="NEURON_PLATFORM_TARGET_OVERRIDE=trn3 in the environment") as err:
        bad_kernel(np.zeros((2, 2), np.float32))
    message = str(err.value)
    assert "nkisim emulates trn2 (gen3) only; unset it or set it to trn2" in message
    assert "test_validation.py:" in message      # the launch line, as every launch error names it


@pytest.mark.usefixtures("nki_0_6")
def test_lnc_must_match_neuron_logical_nc_config(monkeypatch):
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    fails(lambda *a: None, "launched with LNC=1 but NEURON_LOGICAL_NC_CONFIG=2")


def test_under_nki_0_7_an_unbracketed_launch_takes_the_environment_lnc(monkeypatch):
    # "It can be specified using the NEURON_LOGICAL_NC_CONFIG environment variable or via bracket syntax"
    # (LNC overview, Neuron 2.33); a bracket that differs from the compiler's LNC is NCC_EVRF066
    @nki.jit
    def programs(x):
        out = nl.ndarray((1, 2), dtype=nl.int32, buffer=nl.shared_hbm)
        t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
        nisa.memset(dst=t, value=nl.num_programs())
        pid = nl.program_id(0)
        nisa.dma_copy(dst=out[0:1, pid:pid + 1], src=t)
        return out

    x = np.zeros((1, 1), np.float32)
    assert programs(x)[0, 0] == 1                            # unset: LNC=1 outside a graph
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    assert programs(x).tolist() == [[2, 2]]                  # both programs ran
    with pytest.raises(NkiValidationError, match="NCC_EVRF066 NKI kernel 'programs' is configured with LNC=1, "
                                                 "but neuronx-cc is using LNC=2"):
        programs[1](x)
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "3")
    with pytest.raises(NkiValidationError, match="NCC_EARG001.*NEURON_LOGICAL_NC_CONFIG=3"):
        programs(x)


def test_device_lnc_setting_does_not_bind_the_emulator_beside_a_real_sdk(monkeypatch, nki_version):
    # On a trn2 instance NEURON_LOGICAL_NC_CONFIG configures the device runtime; nkisim's dry runs
    # and traces there are not device launches, so an LNC=2 trace works in an LNC=1 process.
    import nkisim

    @nki.jit
    def copy(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        row = nl.program_id(0)  # one row per program
        nisa.dma_copy(dst=out[row:row + 1, :], src=x[row:row + 1, :])
        return out

    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "1")
    with pytest.raises(NkiValidationError, match="launched with LNC=2 but NEURON_LOGICAL_NC_CONFIG=1|"
                                                 "NCC_EVRF066 .* LNC=2, but neuronx-cc is using LNC=1"):
        nkisim.run(copy, np.zeros((2, 2), np.float32), lnc=2, dry_run=True)
    monkeypatch.setattr(sys.modules["nkisim.active_backend"], "real_sdk_dir", lambda: "/opt/neuron/nki")
    assert nkisim.run(copy, np.zeros((2, 2), np.float32), lnc=2, dry_run=True).trace.lnc == 2
