"""A corpus of kernels that each break one documented NKI / trn2 rule, under NKI 0.6 and 0.7.

Every case asserts that nkisim raises `NkiValidationError` (or the documented error type) whose
message names the rule (its key words) and points at the offending kernel line, marked in this file
with a `# BAD:<case>` comment. Launch and argument errors point at the line that launches.
Each case runs under both emulated versions (`nki_versions.emulating`): where the versions agree it
must fail the same way in both; where they differ (`VERSIONS` of the case, or words per version) it
fails with each version's words, and in a version without the rule it must run (the kernel is valid
there). `VALID` holds the twins that must keep passing in both versions.
The kernels that the real toolchain accepts and nkisim once refused are in `test_false_rejections.py`.
"""
from __future__ import annotations

import contextlib
import dataclasses
import enum
import os
import re

import nki
import nki.isa as nisa
import nki.language as nl
import numpy as np
import pytest
import torch
from torch_neuronx import nki_op

import nkisim
from nkisim import NkiValidationError
from nkisim.emulator import nki_versions

BOTH = nki_versions.VERSIONS         # the `nki_version` fixture (conftest.py) runs a test under each
ONLY_06 = (nki_versions.V06,)

FILE = "test_rule_corpus.py"
MARKS = {m.group(1): n for n, line in enumerate(open(__file__), 1) for m in [re.search(r"# BAD:([\w-]+)", line)] if m}
X = np.zeros((128, 8), np.float32)

# Read by kernels (legal); changed between two launches with the same arguments (stale on trn2).
MUTABLE_SHAPES = [128, 8]
CONFIG = {"cols": 8}
SEEN_DTYPES = {"float32"}
ROWS = 128


def _on_tiles(body):
    """A kernel that gives `body` the usual operands: x (HBM [128, 8] fp32), t [128, 8] fp32,
    col [128, 1] fp32, big [256, 8] fp32, it [128, 8] int32, bf [128, 8] bf16 (SBUF), ps (PSUM)."""

    @nki.jit
    def harness(x):
        t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
        col = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
        big = nl.ndarray((256, 8), dtype=nl.float32, buffer=nl.sbuf)
        it = nl.ndarray((128, 8), dtype=nl.int32, buffer=nl.sbuf)
        bf = nl.ndarray((128, 8), dtype=nl.bfloat16, buffer=nl.sbuf)
        ps = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.psum)
        body(x, t, col, big, it, bf, ps)

    return lambda: harness(X)


# --- instruction rules: one body per rule ---------------------------------------------------------
W = 1 << 16
BODIES = {
    "partition-max": (lambda x, t, c, big, it, bf, ps: nisa.tensor_tensor(dst=big, data1=big, data2=big, op=nl.add),  # BAD:partition-max
                      ["partition dimension 256 exceeds maximum 128"]),
    "partition-mismatch": (lambda x, t, c, big, it, bf, ps: nisa.tensor_tensor(dst=t, data1=t, data2=t[0:64], op=nl.add),  # BAD:partition-mismatch
                           ["has 64 partitions but dst has 128", "must match"]),
    "free-mismatch": (lambda x, t, c, big, it, bf, ps: nisa.tensor_copy(dst=t, src=t[:, 0:4]),  # BAD:free-mismatch
                      ["elements per partition", "must match"]),
    "dma-count": (lambda x, t, c, big, it, bf, ps: nisa.dma_copy(dst=t[:, 0:4], src=x),  # BAD:dma-count
                  ["element counts must match"]),
    "dma-from-psum": (lambda x, t, c, big, it, bf, ps: nisa.dma_copy(dst=x, src=ps),  # BAD:dma-from-psum
                      ["PSUM is not a DMA source"]),
    "dma-to-psum": (lambda x, t, c, big, it, bf, ps: nisa.dma_copy(dst=ps, src=x),  # BAD:dma-to-psum
                    ["dst is in psum"]),
    "hwdge-cast": (lambda x, t, c, big, it, bf, ps: nisa.dma_copy(dst=bf, src=x, dge_mode=nisa.dge_mode.hwdge),  # BAD:hwdge-cast
                   ["hwdge copies raw bytes", "float32 != dst dtype bfloat16"]),
    "engine-without-hwdge": (lambda x, t, c, big, it, bf, ps: nisa.dma_copy(dst=t, src=x, engine=nisa.engine.sync),  # BAD:engine-without-hwdge
                             ["only valid with dge_mode=nisa.dge_mode.hwdge"]),
    "dma-priority": (lambda x, t, c, big, it, bf, ps: nisa.dma_copy(dst=t, src=x, priority=1),  # BAD:dma-priority
                     ["NeuronCore-v4 (trn3) only"]),
    "raw-int-enum": (lambda x, t, c, big, it, bf, ps: nisa.dma_copy(dst=t, src=x, dge_mode=3),  # BAD:raw-int-enum
                     ["dge_mode must be a nki.isa.dge_mode member"]),
    "bitvec-on-float": (lambda x, t, c, big, it, bf, ps: nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.bitwise_and),  # BAD:bitvec-on-float
                        ["bit-vector op", "integer dtypes"]),
    "bitvec-scalar-on-float": (lambda x, t, c, big, it, bf, ps: nisa.tensor_scalar(dst=t, data=t, op0=nl.bitwise_or, operand0=1),  # BAD:bitvec-scalar-on-float
                               ["bit-vector op", "integer dtypes"]),
    "bitvec-reduce-on-float": (lambda x, t, c, big, it, bf, ps: nisa.tensor_reduce(dst=c, op=nl.bitwise_xor, data=t, axis=1),  # BAD:bitvec-reduce-on-float
                               ["bit-vector op", "integer dtypes"]),
    "op1-without-operand": (lambda x, t, c, big, it, bf, ps: nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0, op1=nl.multiply),  # BAD:op1-without-operand
                            ["op1", "operand1", "set both or neither"]),
    "operand-not-fp32": (lambda x, t, c, big, it, bf, ps: nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=bf[:, 0:1]),  # BAD:operand-not-fp32
                         ["operand0 tile must be float32"]),
    "mixed-op-kinds": (lambda x, t, c, big, it, bf, ps: nisa.tensor_scalar(dst=it, data=it, op0=nl.add, operand0=1, op1=nl.bitwise_and, operand1=1),  # BAD:mixed-op-kinds
                       ["both be arithmetic or both be bit-vector"]),
    "scalar-engine-pair": (lambda x, t, c, big, it, bf, ps: nisa.tensor_scalar(dst=t, data=t, op0=nl.subtract, operand0=1.0, engine=nisa.engine.scalar),  # BAD:scalar-engine-pair
                           ["Scalar engine supports only (multiply, add)"]),
    "gpsimd-not-rsqrt": (lambda x, t, c, big, it, bf, ps: nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=1.0, engine=nisa.engine.gpsimd),  # BAD:gpsimd-not-rsqrt
                         ["gpsimd is only allowed for nl.rsqrt"]),
    "not-an-activation": (lambda x, t, c, big, it, bf, ps: nisa.activation(dst=t, op=nl.add, data=t),  # BAD:not-an-activation
                          ["is not an activation function", "activation table"]),
    "bias-free-size": (lambda x, t, c, big, it, bf, ps: nisa.activation(dst=t, op=nl.exp, data=t, bias=t),  # BAD:bias-free-size
                       ["bias must be a [128, 1] tile", "free size must be 1"]),
    "reduce-op-not-add": (lambda x, t, c, big, it, bf, ps: nisa.activation_reduce(dst=t, op=nl.exp, data=t, reduce_op=nl.maximum, reduce_res=c),  # BAD:reduce-op-not-add
                          ["reduce_op must be nl.add on trn2"]),
    "reduce-op-none": (lambda x, t, c, big, it, bf, ps: nisa.activation_reduce(dst=t, op=nl.exp, data=t, reduce_op=None, reduce_res=c),  # BAD:reduce-op-none
                       ["reduce_op must be nl.add, got None"]),
    "scale-not-fp32": (lambda x, t, c, big, it, bf, ps: nisa.activation(dst=t, op=nl.exp, data=t, scale=bf[:, 0:1]),  # BAD:scale-not-fp32
                       ["scale tile must be float32"]),
    "reduce-axis-0": (lambda x, t, c, big, it, bf, ps: nisa.tensor_reduce(dst=c, op=nl.add, data=t, axis=0),  # BAD:reduce-axis-0
                      ["axis 0 is the partition dim"]),
    "reduce-axis-not-trailing": (lambda x, t, c, big, it, bf, ps: nisa.tensor_reduce(dst=c, op=nl.add, data=t.reshape(128, 2, 4), axis=1),  # BAD:reduce-axis-not-trailing
                                 ["must be the trailing free dims"]),
    "reduce-dst-size": (lambda x, t, c, big, it, bf, ps: nisa.tensor_reduce(dst=t, op=nl.add, data=t, axis=1),  # BAD:reduce-dst-size
                        ["dst has 8 elements per partition but reducing axes"]),
    "memset-fraction-into-int": (lambda x, t, c, big, it, bf, ps: nisa.memset(dst=it, value=1.5),  # BAD:memset-fraction-into-int
                                 ["value 1.5 is not a whole number but dst dtype is int32"]),
    "memset-range": (lambda x, t, c, big, it, bf, ps: nisa.memset(dst=it, value=2**40),  # BAD:memset-range
                     ["out of range for dst dtype int32"]),
    "divide-alu": (lambda x, t, c, big, it, bf, ps: nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.divide),  # BAD:divide-alu
                   ["op=nl.divide is not an ALU operator"]),
    "divide-callable": (lambda x, t, c, big, it, bf, ps: nl.divide(t, t),  # BAD:divide-callable
                        ["nl.divide is not supported on hardware"]),
    "op-as-string": (lambda x, t, c, big, it, bf, ps: nisa.tensor_tensor(dst=t, data1=t, data2=t, op="add"),  # BAD:op-as-string
                     ["op must be an nki.language operator"]),
    "unary-in-tensor-tensor": (lambda x, t, c, big, it, bf, ps: nisa.tensor_tensor(dst=it, data1=it, data2=it, op=nl.invert),  # BAD:unary-in-tensor-tensor
                               ["is unary; tensor_tensor needs a two-operand ALU op"]),
    "hbm-compute-operand": (lambda x, t, c, big, it, bf, ps: nisa.tensor_copy(dst=t, src=x),  # BAD:hbm-compute-operand
                            ["operands must be in SBUF or PSUM"]),
    "sbuf-free-size": (lambda x, t, c, big, it, bf, ps: nisa.memset(dst=nl.ndarray((128, W + 1), dtype=nl.bfloat16, buffer=nl.sbuf), value=0.0),  # BAD:sbuf-free-size
                       ["free size 65537 elements per partition exceeds maximum 65536"]),
    "start-partition-64": (lambda x, t, c, big, it, bf, ps: nisa.tensor_copy(dst=t[16:64], src=t[16:64]),  # BAD:start-partition-64
                           ["start partition", "48 partitions", "must start at partition 0 or 64"]),
    "start-partition-32": (lambda x, t, c, big, it, bf, ps: nisa.memset(dst=t[8:40], value=0.0),  # BAD:start-partition-32
                           ["start partition", "32 partitions", "0, 32, 64 or 96"]),
    "partition-stride": (lambda x, t, c, big, it, bf, ps: nisa.memset(dst=t[0:128:2], value=0.0),  # BAD:partition-stride
                         ["partition step 2", "consecutive partitions"]),
    "free-dims-over-4": (lambda x, t, c, big, it, bf, ps: nisa.memset(dst=nl.ndarray((128, 4, 4, 4, 4, 4), dtype=nl.float32, buffer=nl.sbuf)[:, 0:2, 0:2, 0:2, 0:2, 0:2], value=0.0),  # BAD:free-dims-over-4
                         ["5 free dimensions", "at most 4"]),
    "free-stride-int16": (lambda x, t, c, big, it, bf, ps: nisa.memset(dst=nl.ndarray((128, 2, 40000), dtype=nl.bfloat16, buffer=nl.sbuf)[:, :, 0], value=0.0),  # BAD:free-stride-int16
                          ["stride 40000 elements", "int16"]),
    "unknown-isa-keyword": (lambda x, t, c, big, it, bf, ps: nisa.activation(dst=t, op=nl.exp, data=t, bogus=1),  # BAD:unknown-isa-keyword
                            ["activation", "unexpected keyword argument 'bogus'"]),
    "missing-isa-argument": (lambda x, t, c, big, it, bf, ps: nisa.tensor_copy(dst=t),  # BAD:missing-isa-argument
                             ["tensor_copy", "missing", "'src'"]),
    "too-many-positional": (lambda x, t, c, big, it, bf, ps: nisa.memset(t, 0.0, nisa.engine.vector, "n", 5),  # BAD:too-many-positional
                            ["memset", "positional argument"]),
    "unknown-ndarray-keyword": (lambda x, t, c, big, it, bf, ps: nl.ndarray((128, 8), dtype=nl.float32, buffr=nl.sbuf),  # BAD:unknown-ndarray-keyword
                                ["ndarray", "unexpected keyword argument 'buffr'"]),
    "string-buffer": (lambda x, t, c, big, it, bf, ps: nl.ndarray((128, 8), dtype=nl.float32, buffer="sbuf"),  # BAD:string-buffer
                      ["buffer"]),
    "index-out-of-bounds": (lambda x, t, c, big, it, bf, ps: t[:, 9],  # BAD:index-out-of-bounds
                            ["out of bounds for dim 1 of size 8"]),
    "reshape-count": (lambda x, t, c, big, it, bf, ps: t.reshape(128, 9),  # BAD:reshape-count
                      ["reshape: element count"]),
    "item-assignment": (lambda x, t, c, big, it, bf, ps: t.__setitem__(0, 1.0),  # BAD:item-assignment
                        ["item assignment copies a tile", "nisa.memset"]),
    "tensor-compared": (lambda x, t, c, big, it, bf, ps: t < 0,  # BAD:tensor-compared
                        ["Python operator '<'", "nisa.tensor_scalar"]),
    "tensor-arithmetic": (lambda x, t, c, big, it, bf, ps: t + 1.0,  # BAD:tensor-arithmetic
                          ["Python operator '+'", "nisa.tensor_scalar"]),
    "tensor-iterated": (lambda x, t, c, big, it, bf, ps: list(t),  # BAD:tensor-iterated
                        ["iterated in Python"]),
    "tfloat32": (lambda x, t, c, big, it, bf, ps: nl.ndarray((128, 8), dtype=nl.tfloat32, buffer=nl.sbuf),  # BAD:tfloat32
                 ["tfloat32", "not emulated"]),
    "dependency-on-itself": (lambda x, t, c, big, it, bf, ps: (lambda ins: ins.depends_on(ins))(nisa.memset(dst=t, value=0.0)),  # BAD:dependency-on-itself
                             ["depends_on", "is the consumer itself"]),
    "dependency-out-of-a-dynamic-loop": (lambda x, t, c, big, it, bf, ps: nisa.memset(dst=t, value=0.0).depends_on(_issued_in_a_loop(t)),  # BAD:dependency-out-of-a-dynamic-loop
                                         ["depends_on", "sits inside a dynamic loop", "same dynamic-loop nesting"]),
}


def _issued_in_a_loop(t):
    """The handle of a memset issued inside an nl.fori_loop of one iteration."""
    issued = []
    nl.fori_loop(0, 1, lambda i: issued.append(nisa.memset(dst=t, value=1.0)))
    return issued[0]


@pytest.mark.parametrize("case", list(BODIES))
def test_instruction_rule(case: str, nki_version: str) -> None:
    body, words = BODIES[case]
    _expect(case, _on_tiles(body), words)


# --- kernel-language rules (checked on the source before the kernel runs) -------------------------
@nki.jit
def uses_is(x):
    t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    if x.dtype is nl.float32:  # BAD:is
        nisa.dma_copy(dst=t, src=x)


@nki.jit
def uses_is_not(x):
    if x.shape is not None:  # BAD:is-not
        nisa.memset(dst=nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf), value=0.0)


@nki.jit
def uses_generator(x):
    total = sum(n for n in x.shape)  # BAD:generator
    nisa.memset(dst=nl.ndarray((128, total), dtype=nl.float32, buffer=nl.sbuf), value=0.0)


def tile_shapes(rows):
    for r in range(0, rows, 128):
        yield r  # BAD:yield


@nki.jit
def uses_a_generator_helper(x):
    for r in tile_shapes(x.shape[0]):
        nisa.memset(dst=nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf), value=float(r))


COUNTER = 0


@nki.jit
def writes_a_global(x):
    global COUNTER  # BAD:global
    COUNTER += 1


def _nonlocal_kernel():
    calls = 0

    @nki.jit
    def k(x):
        nonlocal calls  # BAD:nonlocal
        calls += 1

    return k


@nki.jit
def reads_a_global_list(x):
    t = nl.ndarray((MUTABLE_SHAPES[0], 8), dtype=nl.float32, buffer=nl.sbuf)  # BAD:global-list
    nisa.dma_copy(dst=t, src=x)


@nki.jit
def reads_a_global_dict(x):
    t = nl.ndarray((128, CONFIG["cols"]), dtype=nl.float32, buffer=nl.sbuf)  # BAD:global-dict
    nisa.dma_copy(dst=t, src=x)


@nki.jit
def reads_a_global_set(x):
    if "float32" in SEEN_DTYPES:  # BAD:global-set
        nisa.memset(dst=nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf), value=0.0)


@nki.jit
def reads_a_global_int(x):
    t = nl.ndarray((ROWS, 8), dtype=nl.float32, buffer=nl.sbuf)  # BAD:global-rebound
    nisa.dma_copy(dst=t, src=x)


def _closure_kernel(widths):
    @nki.jit
    def k(x):
        t = nl.ndarray((128, widths[0]), dtype=nl.float32, buffer=nl.sbuf)  # BAD:closure-list
        nisa.dma_copy(dst=t, src=x)

    return k


def _changed_between_launches(kernel, change, undo):
    """Launch, change what the kernel reads, launch again with the same arguments (a compile-cache hit)."""
    kernel(X)
    change()
    try:
        kernel(X)
    finally:
        undo()


def _closure_list_changed():
    widths = [8]
    _changed_between_launches(_closure_kernel(widths), lambda: widths.append(16), widths.pop)


def _rebind_rows(value):
    global ROWS
    ROWS = value


@nki.jit
def int_dict_key(x):
    sizes = {0: 128}  # BAD:dict-key
    nisa.memset(dst=nl.ndarray((sizes[0], 8), dtype=nl.float32, buffer=nl.sbuf), value=0.0)


@nki.jit
def plain_class(x):
    class Tile:  # BAD:class
        rows = 128
    nisa.memset(dst=nl.ndarray((Tile.rows, 8), dtype=nl.float32, buffer=nl.sbuf), value=0.0)


@nki.jit
def imports_neuronxcc(x):
    import neuronxcc.nki.language as legacy  # BAD:neuronxcc  # noqa: F401


def helper_with_is(n):
    return 1 if n is None else n  # BAD:helper-is


@nki.jit
def calls_a_bad_helper(x):
    nisa.memset(dst=nl.ndarray((128, helper_with_is(8)), dtype=nl.float32, buffer=nl.sbuf), value=0.0)


def _keyword_only():
    def k(x, *, scale):  # BAD:keyword-only
        pass
    return nki.jit(k)


# NKI 0.6 rules reached only through methods and module-level classes (issue 27): the 0.6 front end
# reads the classes a kernel uses and inlines their methods, so their code follows its rules too.
class Tiling(nl.NKIObject):
    def rows(self, n):
        return 128 if n is not None else 0  # BAD:method-is-not


@nki.jit
def calls_a_method_with_is_not(x):
    nisa.memset(dst=nl.ndarray((Tiling().rows(8), 8), dtype=nl.float32, buffer=nl.sbuf), value=0.0)


class PlainShape:
    rows = 128


@nki.jit
def uses_a_module_level_plain_class(x):
    nisa.memset(dst=nl.ndarray((PlainShape.rows, 8), dtype=nl.float32, buffer=nl.sbuf), value=0.0)  # BAD:module-class


@nki.jit
def int_key_by_assignment(x):
    sizes = {}
    sizes[0] = 128  # BAD:dict-key-assigned
    nisa.memset(dst=nl.ndarray((sizes[0], 8), dtype=nl.float32, buffer=nl.sbuf), value=0.0)


# NKI 0.7 removed the NKI 0.6 dynamic loops (announce-nki-specialization-change)
@nki.jit
def uses_dynamic_range(x):
    for _ in nl.dynamic_range(2):  # BAD:dynamic-range
        nisa.memset(dst=nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf), value=0.0)


@nki.jit
def while_on_a_register(x):
    reg = nisa.register_alloc(0)
    while reg:  # BAD:while-register
        nisa.register_move(reg, 0)


# NKI 0.7 APIs: the 0.6 parser front end does not have them
@nki.jit
def uses_a_tile_grid(x):
    nl.tiles(x, tile_shape=(128, 8))  # BAD:tile-grid


@nki.jit
def uses_a_scalar_comparison(x):
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=3)
    nisa.scalar_store(t, nisa.scalar_load(t) > 0)  # BAD:scalar-comparison


@nki.jit
def stores_an_int_as_a_scalar(x):
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.scalar_store(t, 5)  # BAD:scalar-store-int


STALE = ["changed since this kernel was compiled for the same arguments", "x: float32[128, 8]",
         "cached compiled kernel would run with the old value", "pure function of its arguments",
         "nki-language-guide.html#kernel-caching", "pass", "as a kernel argument"]
NOT_IN_06 = ["is not in NKI 0.6.0"]
# case -> (run, words, versions that reject it); words may be {version: words}. In the other versions
# the kernel is valid and must run.
LANGUAGE = {
    "is": (lambda: uses_is(X), ["'is' comparison", "use == / !="]),
    "is-not": (lambda: uses_is_not(X), ["'is not' comparison", "use == / !="]),
    "generator": (lambda: uses_generator(X), ["generator expression", "NKI 0.6 front end does not support generators"]),
    "yield": (lambda: uses_a_generator_helper(X), ["'yield'", "does not support generators"]),
    "global": (lambda: writes_a_global(X), ["'global COUNTER'", "pure functions"]),
    "nonlocal": (lambda: _nonlocal_kernel()(X), ["'nonlocal calls'", "pure functions"]),
    "global-list": (lambda: _changed_between_launches(reads_a_global_list, lambda: MUTABLE_SHAPES.append(4),
                                                      MUTABLE_SHAPES.pop), STALE + ["global 'MUTABLE_SHAPES'"]),
    "global-dict": (lambda: _changed_between_launches(reads_a_global_dict, lambda: CONFIG.update(cols=16),
                                                      lambda: CONFIG.update(cols=8)), STALE + ["global 'CONFIG'"]),
    "global-set": (lambda: _changed_between_launches(reads_a_global_set, lambda: SEEN_DTYPES.add("bfloat16"),
                                                     lambda: SEEN_DTYPES.discard("bfloat16")),
                   STALE + ["global 'SEEN_DTYPES'"]),
    "global-rebound": (lambda: _changed_between_launches(reads_a_global_int, lambda: _rebind_rows(64),
                                                         lambda: _rebind_rows(128)), STALE + ["global 'ROWS'"]),
    "closure-list": (_closure_list_changed, STALE + ["closure variable 'widths'"]),
    "dict-key": (lambda: int_dict_key(X), ["dictionary key 0", "only string keys"]),
    "class": (lambda: plain_class(X), ["class Tile()", "must inherit from NKIObject"]),
    "neuronxcc": (lambda: imports_neuronxcc(X), ["neuronxcc", "compilation error since NKI 0.4.0"]),
    "helper-is": (lambda: calls_a_bad_helper(X), ["'is' comparison"]),
    "keyword-only": (lambda: _keyword_only(), ["keyword-only parameters"]),
    "method-is-not": (lambda: calls_a_method_with_is_not(X), ["NKI 0.6.0 language", "'is not' comparison"]),
    "module-class": (lambda: uses_a_module_level_plain_class(X), ["class PlainShape(object)",
                                                                  "must inherit from NKIObject"]),
    "dict-key-assigned": (lambda: int_key_by_assignment(X), ["dictionary key 0 assigned to dict 'sizes'",
                                                              "only string keys"]),
    "dynamic-range": (lambda: uses_dynamic_range(X), ["nki.language.dynamic_range is not in NKI 0.7.0",
                                                      "use nl.fori_loop"]),
    "while-register": (lambda: while_on_a_register(X), ["VirtualRegister used as a Python condition",
                                                        "removed in NKI 0.7", "use nl.while_loop"]),
    "tile-grid": (lambda: uses_a_tile_grid(X), NOT_IN_06 + ["tile-grid layout APIs arrive with NKI 0.7"]),
    "scalar-comparison": (lambda: uses_a_scalar_comparison(X),
                          {nki_versions.V06: NOT_IN_06 + ["nki.isa.scalar_store", "NKI 0.7's tracer front end"],
                           nki_versions.V07: ["comparison is traced but its result cannot be used"]}),
    "scalar-store-int": (lambda: stores_an_int_as_a_scalar(X),
                         {nki_versions.V06: NOT_IN_06 + ["nki.isa.scalar_store"],
                          nki_versions.V07: ["scalar_store: value must be an NkiScalar", "nisa.memset"]}),
}
# The rules of one version only (nki_versions.TABLE); every other case is rejected by both.
VERSIONS = {**{case: ONLY_06 for case in ("is", "is-not", "generator", "yield", "global", "nonlocal", "dict-key",
                                          "class", "helper-is", "method-is-not", "module-class",
                                          "dict-key-assigned", "tile-grid")},
            **{case: (nki_versions.V07,) for case in ("dynamic-range", "while-register")}}


@pytest.mark.parametrize("case", list(LANGUAGE))
def test_language_rule(case: str, nki_version: str) -> None:
    run, words = LANGUAGE[case]
    if nki_version in VERSIONS.get(case, BOTH):
        _expect(case, run, words[nki_version] if isinstance(words, dict) else words)
    else:
        run()          # valid in this version: it runs


# Valid twins of the cases above: the same constructs within the rules, accepted by both versions.
class TilingWithoutIs(nl.NKIObject):
    def rows(self, n):
        return 128 if n != 0 else 0


@dataclasses.dataclass
class ShapeConfig(nl.NKIObject):
    rows: int = 128


class Layout(enum.Enum):
    ROWS_FIRST = 1


@nki.jit
def valid_method_and_classes(x):
    cfg = ShapeConfig()
    assert Layout.ROWS_FIRST == Layout.ROWS_FIRST
    nisa.memset(dst=nl.ndarray((TilingWithoutIs().rows(cfg.rows), 8), dtype=nl.float32, buffer=nl.sbuf), value=0.0)


@nki.jit
def valid_string_key_and_list_index_assignment(x):
    sizes = {}
    sizes["rows"] = 128
    widths = [0]
    widths[0] = 8
    nisa.memset(dst=nl.ndarray((sizes["rows"], widths[0]), dtype=nl.float32, buffer=nl.sbuf), value=0.0)


@nki.jit
def valid_config_argument(x, cfg):
    nisa.memset(dst=nl.ndarray((cfg.rows, 8), dtype=nl.float32, buffer=nl.sbuf), value=0.0)


VALID = {
    "method-and-classes": lambda: valid_method_and_classes(X),
    "string-key-and-list-index": lambda: valid_string_key_and_list_index_assignment(X),
    "nkiobject-argument": lambda: valid_config_argument(X, ShapeConfig()),
    "fori-loop": lambda: _fori_loop_kernel(X),
}


@nki.jit
def _fori_loop_kernel(x):
    t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nl.fori_loop(0, 2, lambda i: nisa.memset(dst=t, value=1.0))


@pytest.mark.parametrize("case", list(VALID))
def test_valid_twin_runs(case: str, nki_version: str) -> None:
    VALID[case]()


# --- launch and argument rules (they point at the launching line) --------------------------------
@nki.jit
def copy_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    nisa.dma_copy(dst=out, src=t)
    return out


@nki.jit
def returns_private_hbm(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.hbm)  # BAD:private-output
    nisa.dma_copy(dst=out, src=x)
    return out


@nki.jit
def returns_a_number(x):
    return 3  # BAD:number-output


@nki.jit
def all_rows_both_programs(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=t, value=float(nl.program_id(0)))
    nisa.dma_copy(dst=out, src=t)  # BAD:lnc2-race
    return out


@nki.jit
def program_dependent_outputs(x):
    out = nl.ndarray((128, 8 + nl.program_id(0)), dtype=x.dtype, buffer=nl.shared_hbm)  # BAD:shared-alloc-mismatch
    return out


@nki.jit
def over_capacity(x):
    a = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)
    b = nl.ndarray((128, 40000), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=a, value=0.0)
    nisa.tensor_copy(dst=b, src=a)  # BAD:sbuf-capacity


def _list_argument():
    copy_kernel([X])  # BAD:list-argument


def _float64_argument():
    copy_kernel(np.zeros((128, 8), np.float64))  # BAD:float64-argument


def _lnc3():
    copy_kernel[3](X)  # BAD:lnc3


def _no_arguments():
    copy_kernel()  # BAD:no-arguments


def _unknown_kernel_keyword():
    copy_kernel(X, scale=2.0)  # BAD:kernel-keyword


def _unknown_jit_option():
    nki.jit(copy_kernel.fn, fast=True)  # BAD:jit-option


@nki.jit
def stages_its_argument(x):
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)  # BAD:zero-d-argument
    nisa.dma_copy(dst=t, src=x)


@nki.jit
def stages_an_empty_tile(x):
    t = nl.ndarray((0, 8), dtype=x.dtype, buffer=nl.sbuf)  # BAD:empty-tile
    nisa.dma_copy(dst=t, src=x[0:0])


class PlainConfig:
    rows = 128


def _plain_class_argument():
    valid_config_argument(X, PlainConfig())  # BAD:argument-class


@contextlib.contextmanager
def _environment(**values: str):
    saved = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _lnc_other_than_the_environment():
    with _environment(NEURON_LOGICAL_NC_CONFIG="2"):
        copy_kernel[1](X)  # BAD:lnc-mismatch


def _compiler_flag_overrides_the_lnc():
    with _environment(NEURON_LOGICAL_NC_CONFIG="2", NEURON_CC_FLAGS="--lnc=1"):
        copy_kernel(X)  # BAD:cc-flags-lnc


@nki_op("nkisim_rule_corpus::plain_launch")
def _plain_launch_op(x: torch.Tensor) -> torch.Tensor:
    return copy_kernel(x)  # BAD:graph-default-lnc


LAUNCH = {
    "private-output": (lambda: returns_private_hbm(X), ["kernel outputs must be allocated with buffer=nl.shared_hbm"]),
    "number-output": (lambda: returns_a_number(X), ["returned int", "kernels return shared_hbm tensors"]),
    "lnc2-race": (lambda: all_rows_both_programs[2](X), ["program 1 writes", "different values", "disjoint rows"]),
    "shared-alloc-mismatch": (lambda: program_dependent_outputs[2](X), ["all programs must allocate the same shared"]),
    "sbuf-capacity": (lambda: over_capacity(X), ["SBUF capacity", "usable 212728 bytes", "peak"]),
    "list-argument": (_list_argument, ["is a list; NKI kernels take tuples"]),
    "float64-argument": (_float64_argument, ["float64 is not an NKI dtype"]),
    "lnc3": (_lnc3, ["NCC_EARG001", "LNC 1 or 2"]),
    "no-arguments": (_no_arguments, ["called with no arguments"]),
    "kernel-keyword": (_unknown_kernel_keyword, ["copy_kernel", "unexpected keyword argument 'scale'"]),
    "jit-option": (_unknown_jit_option, ["nki.jit", "unexpected keyword argument 'fast'"]),
    "zero-d-argument": (lambda: stages_its_argument(np.float32(1.0).reshape(())),
                        ["nl.ndarray", "shape must be a tuple of positive compile-time ints", "got ()"]),
    "empty-tile": (lambda: stages_an_empty_tile(X), ["nl.ndarray", "positive compile-time ints", "got (0, 8)"]),
    "argument-class": (_plain_class_argument, ["NKI 0.6.0 language", "class PlainConfig(object)",
                                               "must inherit from NKIObject"]),
    "lnc-mismatch": (_lnc_other_than_the_environment,
                     {nki_versions.V06: ["launched with LNC=1 but NEURON_LOGICAL_NC_CONFIG=2"],
                      nki_versions.V07: ["NCC_EVRF066", "'copy_kernel' is configured with LNC=1, but neuronx-cc is "
                                         "using LNC=2", "EVRF066.html"]}),
    "cc-flags-lnc": (_compiler_flag_overrides_the_lnc,
                     {nki_versions.V06: ["launched with LNC=1 but NEURON_LOGICAL_NC_CONFIG=2"],
                      nki_versions.V07: ["NCC_EVRF066", "configured with LNC=2, but neuronx-cc is using LNC=1"]}),
    "graph-default-lnc": (lambda: _plain_launch_op(torch.zeros(128, 8)),
                          ["NCC_EVRF066", "configured with LNC=1, but neuronx-cc is using LNC=2"]),
}
LAUNCH_VERSIONS = {"argument-class": ONLY_06, "graph-default-lnc": (nki_versions.V07,)}


@pytest.mark.parametrize("case", list(LAUNCH))
def test_launch_rule(case: str, nki_version: str, monkeypatch) -> None:
    monkeypatch.delenv("NEURON_LOGICAL_NC_CONFIG", raising=False)
    monkeypatch.delenv("NEURON_CC_FLAGS", raising=False)
    run, words = LAUNCH[case]
    if nki_version in LAUNCH_VERSIONS.get(case, BOTH):
        _expect(case, run, words[nki_version] if isinstance(words, dict) else words)
    else:
        run()


# --- state and placement rules (issue 27): explicit placement, indirect views, engine state, operands ---
# Their valid twins are in test_false_rejections.py (`test_state_and_placement_twins_pass`).
@nki.jit
def sbuf_tile_past_the_last_partition(x):
    t = nl.ndarray((64, 8), dtype=nl.float32, buffer=nl.sbuf, address=(100, 0))  # BAD:sbuf-address-partitions
    nisa.memset(dst=t, value=0.0)


@nki.jit
def sbuf_tile_placed_off_its_start_partitions(x):
    t = nl.ndarray((64, 8), dtype=nl.float32, buffer=nl.sbuf, address=(32, 0))
    nisa.memset(dst=t, value=0.0)  # BAD:sbuf-address-start-partition


@nki.jit
def sbuf_tile_past_the_partition_end(x):
    t = nl.ndarray((128, 8000), dtype=nl.float32, buffer=nl.sbuf, address=(0, 200000))  # BAD:sbuf-address-free
    nisa.memset(dst=t, value=0.0)


@nki.jit
def psum_tile_placed_off_its_start_partitions(x):
    ps = nl.ndarray((32, 8), dtype=nl.float32, buffer=nl.psum, address=(16, 0))
    t = nl.ndarray((32, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.tensor_copy(dst=ps, src=t)  # BAD:psum-address-start-partition


@nki.jit
def sbuf_allocation_over_128_partitions_used_in_halves(x):
    big = nl.ndarray((256, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=big[0:128], src=x)  # BAD:allocation-over-128-partitions
    nisa.dma_copy(dst=big[128:256], src=x)


@nki.jit
def vector_offset_into_sbuf(x):
    idx = nl.ndarray((128, 1), dtype=nl.uint32, buffer=nl.sbuf)
    nisa.memset(dst=idx, value=0)
    t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    src = t.ap(pattern=[[8, 128], [1, 8]], vector_offset=idx, indirect_dim=0)  # BAD:vector-offset-on-chip
    nisa.dma_copy(dst=t, src=src)


@nki.jit
def slices_the_indirect_dim(x):
    idx = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=idx, value=0)
    row = x.ap(pattern=[[8, 1], [1, 8]], scalar_offset=idx, indirect_dim=0)
    t = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=row.slice(0, 0, 1))  # BAD:scalar-offset-indirect-dim-sliced


@nki.jit
def dynamic_address_without_dge(x):
    idx = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=idx, value=0)
    row = x.ap(pattern=[[8, 1], [1, 8]], scalar_offset=idx, indirect_dim=0)
    t = nl.ndarray((1, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=row, dge_mode=nisa.dge_mode.none)  # BAD:dynamic-address-dge-none


@nki.jit
def reduces_onto_a_never_reset_accumulator(x):
    t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    col = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.tensor_scalar_reduce(dst=t, data=t, op0=nl.multiply, operand0=1.0, reduce_op=nl.add,  # BAD:vector-accumulator-before-reset
                              reduce_res=col, reduce_cmd=nisa.reduce_cmd.reduce)


@nki.jit
def reduces_after_an_idle_select_reduce(x):
    t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    col = nl.ndarray((128, 1), dtype=nl.float32, buffer=nl.sbuf)
    pred = nl.ndarray((128, 8), dtype=nl.uint8, buffer=nl.sbuf)
    nisa.memset(dst=t, value=1.0)
    nisa.memset(dst=pred, value=1)
    nisa.tensor_scalar_reduce(dst=t, data=t, op0=nl.multiply, operand0=1.0, reduce_op=nl.add, reduce_res=col)
    nisa.select_reduce(dst=t, predicate=pred, on_true=t, on_false=0.0)
    nisa.tensor_scalar_reduce(dst=t, data=t, op0=nl.multiply, operand0=1.0, reduce_op=nl.add,  # BAD:vector-accumulator-after-idle
                              reduce_res=col, reduce_cmd=nisa.reduce_cmd.reduce)


@nki.jit
def copies_an_empty_slice(x):
    t = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=0.0)
    nisa.tensor_copy(dst=t[:, 8:8], src=t[:, 0:0])  # BAD:empty-operand


@nki.jit
def loads_a_register_from_psum(x):
    ps = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.psum)
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=3)
    nisa.tensor_copy(dst=ps, src=t)
    reg = nisa.register_alloc(0)
    nisa.register_load(reg, ps)  # BAD:register-load-from-psum


STATE = {
    "sbuf-address-partitions": (sbuf_tile_past_the_last_partition,
                                ["address partition offset 100 with 64 partitions", "partitions 0..127"]),
    "sbuf-address-start-partition": (sbuf_tile_placed_off_its_start_partitions,
                                     ["start partition 32", "starts at partition 32 by address=", "0 or 64"]),
    "sbuf-address-free": (sbuf_tile_past_the_partition_end, ["free offset 200000", "bytes 200000..231999", "229376 bytes of an SBUF partition"]),
    "psum-address-start-partition": (psum_tile_placed_off_its_start_partitions,
                                     ["start partition 16", "by address=", "0, 32, 64 or 96"]),
    "allocation-over-128-partitions": (sbuf_allocation_over_128_partitions_used_in_halves,
                                       ["partition dimension 256 exceeds maximum 128", "tile-size constraint #1"]),
    "vector-offset-on-chip": (vector_offset_into_sbuf, ["indexed by a vector_offset must be in HBM", "in sbuf"]),
    "scalar-offset-indirect-dim-sliced": (slices_the_indirect_dim,
                                          ["dim 0 takes part in this view's indirection and cannot be sliced"]),
    "dynamic-address-dge-none": (dynamic_address_without_dge,
                                 ["dge_mode=none", "no dynamic (runtime) start address", "swdge or hwdge"]),
    "vector-accumulator-before-reset": (reduces_onto_a_never_reset_accumulator,
                                        ["reduce_cmd=reduce", "accumulator", "since the kernel started",
                                         "reset_reduce"]),
    "vector-accumulator-after-idle": (reduces_after_an_idle_select_reduce,
                                      ["after the reduce_cmd=idle select_reduce", "Always use reset_reduce"]),
    "empty-operand": (copies_an_empty_slice, ["empty view of shape (128, 0)", "positive integers"]),
    "register-load-from-psum": (loads_a_register_from_psum, ["register_load", "in psum", "HBM or SBUF"]),
}


@pytest.mark.parametrize("case", list(STATE))
def test_state_and_placement_rule(case: str) -> None:
    kernel, words = STATE[case]
    _expect(case, lambda: kernel(X), words)


def test_the_corpus_is_large_and_every_case_is_marked() -> None:
    cases = list(BODIES) + list(LANGUAGE) + list(LAUNCH) + list(STATE)
    assert len(cases) >= 60 and len(set(cases)) == len(cases)
    assert set(cases) == set(MARKS)


def _expect(case: str, run, words) -> None:
    with pytest.raises(NkiValidationError) as info:
        run()
    message = str(info.value)
    for word in words:
        assert word in message, f"{case}: {word!r} not in {message!r}"
    assert f"({FILE}:{MARKS[case]})" in message, f"{case}: line {MARKS[case]} not named in {message!r}"
    assert nkisim.NkiValidationError is NkiValidationError
