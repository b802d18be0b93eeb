"""The golden schedule corpus: traces of the lesson kernels, `kernels/`, the cost-model tests, LNC=2
launches with barriers and sendrecv, scheduling edges and small matmuls, with the schedule the cost
model gave each one when the fixture was recorded (`fixtures/golden_schedules.json.gz`).

The fixture freezes the scheduler's whole input: each trace (every field), each task's duration,
Tensor-engine terms (result latency, utilization) and streamed saving (the access overhead a Vector or
Scalar instruction hides behind the previous one), and the placement constants (`PLACEMENT_CONSTANTS`).
`test_golden_schedules.py` rebuilds the tasks from the stored trace, checks their dependencies (and the turns
engines take on hardware they share), gives them
the stored durations, Tensor terms and savings and compares
every slot (every field, in order) and the critical path exactly. So
the comparison checks the scheduler alone: a change to a cost rule, a constant or the emulator's
trace leaves the fixture valid.

Regenerate (only when the scheduler's documented model changes on purpose; it records what the
scheduler at HEAD computes):  .venv/bin/python tests/costmodel/schedule_corpus.py
"""
from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = Path(__file__).parent / "fixtures" / "golden_schedules.json.gz"
PLACEMENT_CONSTANTS = ("SEMAPHORE_LATENCY_S", "DMA_TRANSFER_FIXED_S", "DMA_QUEUE_LATENCY_S", "TENSOR_THROTTLE_FLOOR",
                       "TENSOR_THROTTLE_RAMP_S", "TENSOR_THROTTLE_WINDOW_S")

from nkisim.emulator.trace import Allocation, DmaInfo, Instruction, Operand, Region, Trace  # noqa: E402

_RECORDS = {"instruction": Instruction, "operand": Operand, "region": Region, "dma": DmaInfo}


def _names(cls) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def encode_trace(trace: Trace) -> dict[str, Any]:
    """Every field of the trace as JSON values (records as lists in `_names` order)."""
    def operand(o: Operand) -> list:
        return [dataclasses.astuple(o.region) if n == "_region" else getattr(o, n) for n in _names(Operand)]

    def instruction(i: Instruction) -> list:
        out = []
        for n in _names(Instruction):
            v = getattr(i, n)
            if n in ("reads", "writes"):
                v = [operand(o) for o in v]
            elif n == "dma":
                v = None if v is None else dataclasses.astuple(v)
            out.append(v)
        return out

    return {"kernel": trace.kernel, "lnc": trace.lnc, "dry_run": trace.dry_run,
            "sbuf_peak_bytes_per_partition": sorted(trace.sbuf_peak_bytes_per_partition.items()),
            "order_edges": trace.order_edges, "issue_edges": list(trace.issue_edges),
            "instructions": [instruction(i) for i in trace.instructions],
            "sbuf_allocations": [dataclasses.astuple(a) for a in trace.sbuf_allocations],
            "psum_banks": [list(b) for b in trace.psum_banks]}


def _tuples(v: Any) -> Any:
    """JSON lists back to the tuples the trace held (shapes, attrs such as a barrier's cores)."""
    return tuple(_tuples(x) for x in v) if isinstance(v, list) else v


def decode_trace(data: dict[str, Any], fields: dict[str, list[str]]) -> Trace:
    def record(kind: str, values: list) -> dict[str, Any]:
        return dict(zip(fields[kind], values, strict=True))

    def operand(values: list) -> Operand:
        kw = record("operand", values)
        kw["shape"] = tuple(kw["shape"])
        kw["_region"] = Region(*kw["_region"])
        return Operand(**kw)

    instructions = []
    for values in data["instructions"]:
        kw = record("instruction", values)
        kw["reads"] = tuple(operand(o) for o in kw["reads"])
        kw["writes"] = tuple(operand(o) for o in kw["writes"])
        kw["attrs"] = {k: _tuples(v) for k, v in kw["attrs"].items()}
        kw["dma"] = None if kw["dma"] is None else DmaInfo(*kw["dma"])
        instructions.append(Instruction(**kw))
    return Trace(kernel=data["kernel"], lnc=data["lnc"], instructions=instructions,
                 sbuf_peak_bytes_per_partition=dict(data["sbuf_peak_bytes_per_partition"]),
                 dry_run=data["dry_run"], order_edges=[tuple(e) for e in data["order_edges"]],
                 issue_edges=tuple(tuple(e) for e in data["issue_edges"]),
                 sbuf_allocations=[Allocation(*a) for a in data["sbuf_allocations"]],
                 psum_banks=tuple(tuple(b) for b in data.get("psum_banks", ())))


def slot_rows(sched) -> tuple[list[list], list[int]]:
    """A schedule as rows (one per slot, in order) and its critical path as slot positions."""
    rows = [[list(v) if isinstance(v, tuple) else v for v in dataclasses.astuple(s)] for s in sched.slots]
    position = {id(s): n for n, s in enumerate(sched.slots)}
    return rows, [position[id(s)] for s in sched.critical_path]


def load() -> dict[str, Any]:
    with gzip.open(FIXTURE, "rt") as f:
        return json.load(f)


# ---- the corpus ----------------------------------------------------------------------------------
def _corpus() -> list[tuple[str, Callable[[], Trace]]]:
    """(name, trace builder) for every entry; imports the kernels only when called."""
    sys.path[:0] = [str(ROOT / "notebooks"), str(ROOT / "benchmarks"), str(ROOT / "tests" / "costmodel"),
                    str(ROOT / "tests" / "nkisim")]
    import nkisim
    nkisim.install()
    import numpy as np
    import torch

    import kernels
    import test_collectives as collectives
    import test_lnc2_synchronisation as lnc2
    import test_hardware_dge as hw_dge
    import test_psum_banks as psum
    import test_scheduling_constraints as ordering
    import test_shared_bus as bus
    from lesson_kernels import folded_linear_steps, gelu_naive, gelu_one_tile, gelu_per_tile, gelu_tuning
    from lesson_kernels import layernorm_dge, layernorm_grouped, layernorm_loads_first, layernorm_naive, layernorm_thinned
    from lesson_kernels.folded_linear_check import make_problem
    from lesson_kernels.layernorm_check import EPS, fold_inputs
    from nkisim.costmodel.variants import alongside, with_dge_mode
    from speed_kernels import tiled_matmul
    from tracebuild import gelu_like, loads_and_stores, many_small_dmas

    def dry(kernel, *args, **kwargs) -> Callable[[], Trace]:
        return lambda: nkisim.run(kernel, *args, dry_run=True, **kwargs).trace

    def full(kernel, *args, **kwargs) -> Callable[[], Trace]:
        return lambda: nkisim.run(kernel, *args, **kwargs).trace

    bf16 = torch.bfloat16
    x_pub = torch.empty(3216, 4096, dtype=bf16)
    x_small = torch.empty(300, 64, dtype=bf16)
    budget = kernels.FOLD_SBUF_BUDGET
    fold_a, fold_b = fold_inputs(1024, 768, 2)
    entries: list[tuple[str, Callable[[], Trace]]] = []

    # synthetic traces of the cost-model tests (tracebuild)
    for rows, cols, kw in [(640, 512, {}), (640, 512, {"backward": True}), (1280, 2048, {"dge_mode": "none"}),
                           (1000, 2048, {"backward": True}), (1024, 512, {"dge_mode": "swdge"}),
                           (700, 1024, {"backward": True}), (2048, 2048, {}), (2048, 2048, {"lnc": 2}),
                           (1024, 1024, {"backward": True, "dge_mode": "hwdge", "lnc": 2})]:
        entries.append((f"gelu_like {rows}x{cols} {kw}", lambda r=rows, c=cols, k=kw: gelu_like(r, c, **k)))
    for queue in ("Sync", "Scalar"):
        entries.append((f"loads_and_stores store_queue={queue}", lambda q=queue: loads_and_stores(q)))
    for mode in ("none", "hwdge", "swdge"):
        entries.append((f"many_small_dmas {mode}", lambda m=mode: many_small_dmas(m)))
    entries.append(("gelu_like alongside its hwdge copy",
                    lambda: alongside(gelu_like(512, 2048), with_dge_mode(gelu_like(512, 2048), "hwdge"))))

    # the finished kernels at the lessons' shapes
    entries += [("gelu_fwd [3216, 4096] bf16", dry(kernels.gelu_fwd, x_pub)),
                ("gelu_fwd [3216, 4096] bf16 LNC=2", dry(kernels.gelu_fwd, x_pub, lnc=2)),
                ("gelu_bwd [3216, 4096] bf16", dry(kernels.gelu_bwd, x_pub, x_pub)),
                ("gelu_bwd [3216, 4096] bf16 LNC=2", dry(kernels.gelu_bwd, x_pub, x_pub, lnc=2)),
                ("gelu_fwd [300, 64] bf16", dry(kernels.gelu_fwd, x_small)),
                ("fold [1024, 768] x2", dry(kernels.res_layernorm_fold_kernel, fold_a, fold_b, EPS, budget)),
                ("fold [2048, 768] x2 LNC=2",
                 dry(kernels.res_layernorm_fold_kernel, *fold_inputs(2048, 768, 2), EPS, budget, lnc=2)),
                ("fold [2048, 1280] x1", dry(kernels.res_layernorm_fold_kernel, *fold_inputs(2048, 1280, 1), EPS,
                                             budget))]
    problem = make_problem(512, 384, 1152)
    linear_args = (problem.z, problem.weight, problem.bias)
    entries.append(("folded_linear [512, 384] -> 1152 LNC=2",
                    dry(kernels.folded_linear_kernel, *linear_args, kernels.limits.FOLDED_LINEAR_WEIGHT_BUDGET,
                        lnc=2)))

    # the lessons' intermediate kernels
    entries += [("gelu_one_tile [128, 512]", dry(gelu_one_tile.gelu_one_tile, torch.empty(128, 512))),
                ("gelu_naive_erf [3216, 4096] bf16", dry(gelu_naive.gelu_naive_erf, x_pub)),
                ("gelu_per_tile [3216, 512]", dry(gelu_per_tile.gelu_per_tile, torch.empty(3216, 512))),
                ("gelu_bwd_per_tile [300, 64]", dry(gelu_per_tile.gelu_bwd_per_tile, x_small, x_small))]
    for slots in (1, 2, 4):
        entries.append((f"gelu_fwd_double_buffered slots={slots}",
                        dry(gelu_tuning.gelu_fwd_double_buffered, x_pub, slots=slots)))
    for name in ("gelu_fwd_wide", "gelu_fwd_hwdge", "gelu_fwd_unrolled", "gelu_fwd_two_queues"):
        entries.append((f"{name} [3216, 4096] bf16", dry(getattr(gelu_tuning, name), x_pub)))
    for kernel in (layernorm_naive.res_layernorm_naive, layernorm_thinned.res_layernorm_thinned,
                   layernorm_thinned.res_layernorm_onepass, layernorm_dge.res_layernorm_hwdge,
                   layernorm_dge.res_layernorm_dge_none, layernorm_loads_first.res_layernorm_ring,
                   layernorm_loads_first.res_layernorm_loads_first):
        entries.append((f"{kernel.__name__} [1024, 768] x2", dry(kernel, fold_a, fold_b, EPS)))
    for kernel in (layernorm_grouped.res_layernorm_grouped, layernorm_grouped.res_layernorm_grouped_naive_chain):
        entries.append((f"{kernel.__name__} [1024, 768] x2", dry(kernel, fold_a, fold_b, EPS, budget)))
    entries.append(("res_layernorm_naive beside a gelu_fwd neighbour",
                    lambda: alongside(nkisim.run(layernorm_naive.res_layernorm_naive, *fold_inputs(256, 384, 2), EPS,
                                                 dry_run=True).trace,
                                      with_dge_mode(nkisim.run(kernels.gelu_fwd, torch.empty(1024, 4096, dtype=bf16),
                                                               dry_run=True).trace, "hwdge"))))
    for kernel in (folded_linear_steps.linear_naive, folded_linear_steps.linear_psum_accumulate,
                   folded_linear_steps.linear_weights_stationary):
        entries.append((f"{kernel.__name__} [512, 384] -> 1152", dry(kernel, *linear_args)))

    # LNC=2 synchronisation and the kernel's own scheduling edges
    x_sync = np.ones((256, 512), np.float32)
    x_coll = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)
    entries += [("barrier_after_uneven_work LNC=2", full(lnc2.barrier_after_uneven_work, x_sync, lnc=2)),
                ("send_after_long_work LNC=2", full(lnc2.send_after_long_work, x_sync, lnc=2)),
                ("barrier kernel beside itself", lambda: alongside(
                    *(nkisim.run(lnc2.barrier_after_uneven_work, x_sync, lnc=2).trace for _ in range(2)))),
                ("ring_swap LNC=2", full(collectives.ring_swap, x_coll, lnc=2)),
                ("pipelined sendrecv LNC=2", full(collectives.pipelined, x_coll, lnc=2)),
                ("exchange_through_hbm LNC=2", full(collectives.exchange_through_hbm, x_coll, lnc=2))]
    x_order = ordering.X
    entries += [("free_order", dry(ordering.free_order, x_order)),
                ("kept_order (no_reorder)", dry(ordering.kept_order, x_order)),
                ("with_schedule edge", dry(ordering.free_order.with_schedule([("quick", "slow")]), x_order)),
                ("depends_on runtime", dry(ordering.runtime_dependency, x_order)),
                ("depends_on schedule", dry(ordering.schedule_dependency, x_order)),
                ("free_order beside kept_order", lambda: alongside(
                    nkisim.run(ordering.free_order, x_order, dry_run=True).trace,
                    nkisim.run(ordering.kept_order, x_order, dry_run=True).trace))]

    # engines taking turns on hardware they share; hardware DGE beside Scalar's compute
    entries += [("Vector and Scalar on one PSUM bank", dry(psum.one_tile, torch.empty(128, 512, dtype=bf16))),
                ("GpSimd, then a perf-mode Vector copy", dry(bus.two_copies(bus.nl.bfloat16, 1, True),
                                                             torch.empty(bus.P, bus.N, dtype=bf16))),
                ("a perf-mode Vector copy, then GpSimd", dry(bus.two_copies(bus.nl.bfloat16, 1, False),
                                                             torch.empty(bus.P, bus.N, dtype=bf16))),
                ("hwdge from Scalar after an ACTIVATE",
                 dry(hw_dge.activation_then_store(hw_dge.nisa.dge_mode.hwdge, hw_dge.nisa.engine.scalar),
                     torch.empty(hw_dge.P, hw_dge.WIDE), torch.empty(hw_dge.P, hw_dge.NARROW)))]

    # small matmuls: many same-lane loads ready at once
    for m, k, n in ((128, 256, 512), (256, 1024, 1024), (512, 512, 2048)):
        lhs_t = torch.empty(k, m, device="meta")
        rhs = torch.empty(k, n, device="meta")
        entries.append((f"tiled_matmul M={m} K={k} N={n}", dry(tiled_matmul, lhs_t, rhs)))
        entries.append((f"tiled_matmul M={m} K={k} N={n} beside its hwdge copy", lambda a=lhs_t, b=rhs: alongside(
            nkisim.run(tiled_matmul, a, b, dry_run=True).trace,
            with_dge_mode(nkisim.run(tiled_matmul, a, b, dry_run=True).trace, "hwdge"))))
    return entries


def record() -> dict[str, Any]:
    """The fixture: every corpus trace with its tasks' dependencies and durations and its schedule."""
    from nkisim.costmodel import constants as K
    from nkisim.costmodel.scheduler import _build_tasks, _durations, schedule, stream_savings, tensor_terms

    out: dict[str, Any] = {
        "commit": subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip(),
        "generated_by": "tests/costmodel/schedule_corpus.py",
        "fields": {kind: _names(cls) for kind, cls in _RECORDS.items()},
        "constants": {name: getattr(K, name) for name in PLACEMENT_CONSTANTS},
        "entries": []}
    for name, build in _corpus():
        trace = build()
        tasks = _build_tasks(trace)
        durations = _durations(trace, tasks)
        rows, path = slot_rows(schedule(trace))
        out["entries"].append({"name": name, "trace": encode_trace(trace), "deps": [t.deps for t in tasks],
                               "issue_after": [t.issue_after for t in tasks],
                               "turn_after": [list(t.turn_after) for t in tasks],
                               "durations": durations, "tensor": tensor_terms(tasks, durations)._asdict(),
                               "stream": stream_savings(tasks),
                               "slots": rows, "critical_path": path})
        print(f"{name}: {len(trace)} instructions, {len(tasks)} tasks")
    return out


def main() -> None:
    data = record()
    FIXTURE.parent.mkdir(exist_ok=True)
    with gzip.open(FIXTURE, "wt", compresslevel=9) as f:
        json.dump(data, f, separators=(",", ":"))
    print(f"{FIXTURE.relative_to(ROOT)}: {len(data['entries'])} traces, {FIXTURE.stat().st_size / 1024:.0f} KiB, "
          f"from commit {data['commit']}")


if __name__ == "__main__":
    main()
