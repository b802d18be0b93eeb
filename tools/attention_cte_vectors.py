"""nki-library's attention_cte test vectors with a published figure, read from its test file (parsed, not imported).

The integration test file parametrizes each unit test with a table: a column string (`"bs, seqlen_kv, ..."`) and
rows of literals (numbers, `16 * 1024 + 16`, `nl.bfloat16`, tuples). Every row of the no-context-parallel unit
tests whose `tpbSgCyclesSum` (a tuple's first slot) is a number becomes a `Vector`: the launch it describes, where
it is (test, line) and its figure. Context-parallel tests are left out: a rank's offsets are runtime inputs the
figure's run chose. `MAX_SCORES` bounds the vectors kept, so that the stored traces and the test suite's time stay
modest. tools/record_dev_set.py records each kept vector's trace and writes its figure into figures.json.
"""
from __future__ import annotations

import ast
import operator
from dataclasses import dataclass

TEST_FILE = "test/integration/nkilib/core/attention/test_attention_cte.py"
UNIT_TESTS = ("test_attention_cte_no_cp_unit", "test_attention_cte_no_cp_vnc_unit",
              "test_attention_cte_no_cp_vnc_apc_klr_unit", "test_attention_cte_no_cp_vnc_gqa_unit",
              "test_attention_cte_no_cp_vnc_barometer_unit")
# at most this many query-key scores (batch x S_q x S_kv, half of it under a causal mask): up to 8192 x 8192 causal
# at batch 2, about 20,000 instructions a trace
MAX_SCORES = 2 ** 26
FIGURE_COLUMN = "tpbSgCyclesSum"
_ARITHMETIC = {ast.Mult: operator.mul, ast.Add: operator.add, ast.Sub: operator.sub}


@dataclass(frozen=True)
class Attention:
    """One attention_cte launch: its LNC and the arguments its test builds."""
    lnc: int
    bs: int
    bs_kv: int
    seqlen_kv: int
    seqlen_q: int
    d: int
    dtype: str
    causal: bool
    tp_q: bool
    tp_k: bool
    tp_out: bool
    sink: bool = False
    sliding_window: int = 0
    prior: tuple[int, int] | None = None   # prefix caching: (prior length, prior_used_len)
    scale: float = 1.0

    @property
    def name(self) -> str:
        flags = "".join(f"_{k}" for k in ("causal", "tp_q", "tp_k", "tp_out", "sink") if getattr(self, k))
        prior = f"_prior{self.prior[0]}u{self.prior[1]}" if self.prior else ""
        scale = f"_scale{self.scale:g}" if self.scale != 1.0 else ""
        return (f"attention_cte_lnc{self.lnc}_b{self.bs}kv{self.bs_kv}_q{self.seqlen_q}_kv{self.seqlen_kv}_d{self.d}"
                f"_{self.dtype}{flags}_swa{self.sliding_window}{prior}{scale}")

    @property
    def scores(self) -> float:
        pairs = self.bs * self.seqlen_q * self.seqlen_kv
        return pairs / 2 if self.causal else pairs


@dataclass(frozen=True)
class Vector:
    test: str
    line: int
    figure_ps: float            # the published tpbSgCyclesSum, read as picoseconds
    shares_figure: int          # how many vectors of the file carry the same figure (this one included)
    vnc_column: bool            # whether the test's table has a vnc_degree column
    passes_vnc: bool            # whether the test launches with it (CompilerArgs(logical_nc_config=vnc_degree))
    attention: Attention


def _literal(node: ast.AST):
    """The value of a table cell: a number, arithmetic on numbers, a tuple, None/True/False or a dtype name."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _ARITHMETIC:
        return _ARITHMETIC[type(node.op)](_literal(node.left), _literal(node.right))
    if isinstance(node, ast.Tuple):
        return tuple(_literal(e) for e in node.elts)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("np", "nl"):
        return node.attr
    raise ValueError(f"line {node.lineno}: a table cell this reader does not know: {ast.unparse(node)}")


def _figure(cell) -> float | None:
    return cell[0] if isinstance(cell, tuple) else cell


def _attention(row: dict, lnc: int) -> Attention:
    prior = (row["prior_len"], row["prior_used_len"]) if row.get("prior_len") else None
    return Attention(lnc, row["bs"], row.get("bs_kv", row["bs"]), row["seqlen_kv"], row["seqlen_q"], row["d"],
                     row["dtype"], row["causal_mask"], row["tp_q"], row.get("tp_k", False), row["tp_out"],
                     row.get("sink", False), row.get("sliding_window", 0), prior, float(row["softmax_scale"]))


def vectors(source: str, max_scores: float = MAX_SCORES) -> list[Vector]:
    """The vectors of the unit tests in this test-file source that have a figure and at most `max_scores` scores.

    LNC: the vector's vnc_degree column where its table has one, else 1. The figures follow the column even where
    the test no longer passes it (test_attention_cte_no_cp_vnc_unit launches every row with CompilerArgs(), trn2's
    default LNC 2, yet two of its rows that differ only in vnc_degree carry different figures), and the table
    without the column (test_attention_cte_no_cp_unit) carries figures of one NeuronCore's work (about twice those
    of the LNC-2 rows of similar size in test_attention_cte_no_cp_vnc_unit). This reading is the project's."""
    tree = ast.parse(source)
    assigned = {n.targets[0].id: n.value for n in ast.walk(tree)
                if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)}
    rows = []
    for test in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name in UNIT_TESTS):
        table = next(d for d in test.decorator_list
                     if isinstance(d, ast.Call) and getattr(d.func, "attr", "") == "parametrize")
        columns = [c.strip() for c in assigned[table.args[0].id].value.split(",")]
        passes_vnc = any(isinstance(c, ast.Call) and getattr(c.func, "id", "") == "CompilerArgs"
                         and any(k.arg == "logical_nc_config" for k in c.keywords) for c in ast.walk(test))
        for node in assigned[table.args[1].id].elts:
            rows.append((test.name, node.lineno, passes_vnc, dict(zip(columns, map(_literal, node.elts)))))
    figures = [_figure(row[FIGURE_COLUMN]) for *_, row in rows]
    out = []
    for (test, line, passes_vnc, row), figure in zip(rows, figures):
        vector = Vector(test, line, figure, figures.count(figure), "vnc_degree" in row, passes_vnc,
                        _attention(row, row.get("vnc_degree", 1)))
        if figure is not None and vector.attention.scores <= max_scores:
            out.append(vector)
    return out


def reading(v: Vector) -> str:
    """How the figure was read (figures.json `reading`)."""
    default = "CompilerArgs(), trn2's default LNC 2 (test/utils/common_dataclasses.py)"
    if not v.vnc_column:
        lnc = (f"LNC 1: this test's table has no vnc_degree column and the test now launches with {default}, but "
               "its figures are one NeuronCore's: about twice those of the LNC-2 vectors of similar work in "
               "test_attention_cte_no_cp_vnc_unit (1250e6 for 9216 x 9216 non-causal fp32 here, 520e6 for "
               "8192 x 8192 there; the project's reading, see tools/attention_cte_vectors.py)")
    elif v.passes_vnc:
        lnc = f"LNC {v.attention.lnc}, its vnc_degree column, which the test passes (CompilerArgs(logical_nc_config=...))"
    else:
        lnc = (f"LNC {v.attention.lnc}, its vnc_degree column: the test now launches every vector with {default}, "
               "but its figures follow the column (two of its vectors that differ only in vnc_degree, 2 and 1, "
               "carry 115e6 and 155e6)")
    shared = f"; {v.shares_figure} vectors of the file carry this figure" if v.shares_figure > 1 else ""
    return (f"The {v.test} vector at line {v.line} (q, k, v and the optional inputs as its build_attention_cte_input "
            f"makes them), modeled at {lnc}. tpbSgCyclesSum: nki-library's per-test-vector QoR figure, which the test "
            "takes as a parameter and never compares with a run (nothing in the repository does); a tuple's second slot "
            "is undocumented, its first is taken. Read as a REGRESSION THRESHOLD, not a measurement of this vector: the "
            "values carry two or three significant figures and are shared by vectors of different work"
            f"{shared}, and disabled vectors are written as a figure plus 2% ('930e7 * 1.02'): an upper bound with a "
            "margin (the direction is inferred). Unit and span as rmsnorm_quant's test vectors (the same collector): "
            f"picoseconds of the graph's whole execution on the slower physical core, launch preamble included "
            f"({v.figure_ps:,.0f} -> {v.figure_ps / 1e6:g} us).")
