"""The two programs of an LNC=2 launch working together (collectives.py, interleave.py): data
exchange with sendrecv, core_barrier, the cross-core race check with synchronisation, and
deadlocks reported instead of hanging."""
import re

import nki
import nki.isa as nisa
import nki.language as nl
import ml_dtypes
import numpy as np
import pytest

import nkisim
from nkisim import NkiValidationError
from nkisim.emulator import nki_versions

LINE = r"\(test_collectives\.py:\d+\)"
X = np.arange(8 * 4, dtype=np.float32).reshape(8, 4)


@nki.jit
def ring_swap(x):
    """Each core loads its half, sends it to the other core and stores what it receives."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    half = x.shape[0] // 2
    mine = nl.ndarray((half, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    got = nl.ndarray((half, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=mine, src=x[pid * half:(pid + 1) * half])
    nisa.sendrecv(src=mine, dst=got, send_to_rank=(pid + 1) % 2, recv_from_rank=(pid - 1) % 2, pipe_id=0)
    nisa.dma_copy(dst=out[pid * half:(pid + 1) * half], src=got)
    return out


def test_sendrecv_swaps_halves_between_the_cores():
    r = nkisim.run(ring_swap, X, lnc=2)
    assert np.array_equal(r.outputs, np.concatenate([X[4:], X[:4]]))
    assert [i.isa for i in r.trace.program(0)] == ["dma_copy", "sendrecv", "dma_copy"]
    assert r.trace.program(1)[1].attrs["send_to_rank"] == 0


def test_sendrecv_names_the_operand_not_in_sbuf():
    """The sendrecv page: "Both src and dst tiles must be in SBUF" (HBM and PSUM are refused alike)."""
    @nki.jit
    def from_hbm(x):
        pid = nl.program_id(0)
        got = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.sendrecv(src=x, dst=got, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=0)
        return x

    with pytest.raises(NkiValidationError, match=r"src is in shared_hbm; both src and dst of sendrecv must be in SBUF"):
        nkisim.run(from_hbm[2], X)


@nki.jit
def pipelined(x):
    """Three exchanges on pipes 1, 1, 0: each pipe delivers its messages in order."""
    out = nl.ndarray((3, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    rows = [nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf) for _ in range(3)]
    recv = [nl.ndarray((1, 4), dtype=x.dtype, buffer=nl.sbuf) for _ in range(3)]
    for k, pipe in enumerate((1, 1, 0)):
        nisa.dma_copy(dst=rows[k], src=x[k + 4 * pid:k + 4 * pid + 1])
        nisa.sendrecv(src=rows[k], dst=recv[k], send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=pipe)
    if pid == 1:
        for k in range(3):
            nisa.dma_copy(dst=out[k:k + 1], src=recv[k])
    return out


def test_sendrecv_messages_arrive_in_order_per_pipe():
    assert np.array_equal(pipelined[2](X), X[0:3])


@nki.jit
def exchange_through_hbm(x):
    """Both cores write disjoint halves of a shared tensor, barrier, then read the other half."""
    shared = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    half = x.shape[0] // 2
    t = nl.ndarray((half, x.shape[1]), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[pid * half:(pid + 1) * half])
    nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0)
    nisa.dma_copy(dst=shared[pid * half:(pid + 1) * half], src=t)
    nisa.core_barrier(data=shared, cores=(0, 1))
    other = 1 - pid
    nisa.dma_copy(dst=t, src=shared[other * half:(other + 1) * half])
    nisa.dma_copy(dst=out[pid * half:(pid + 1) * half], src=t)
    nisa.core_barrier(data=shared, cores=(0, 1))
    nisa.dma_copy(dst=shared[other * half:(other + 1) * half], src=t)   # ordered after the other's writes
    return out


def test_core_barrier_orders_shared_hbm_accesses():
    got = exchange_through_hbm[2](X)
    assert np.array_equal(got, 2 * np.concatenate([X[4:], X[:4]]))


@nki.jit
def read_without_barrier(x):
    shared = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    t = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[pid * 4:(pid + 1) * 4])
    if pid == 0:
        nisa.dma_copy(dst=shared[0:4], src=t)
    else:
        nisa.dma_copy(dst=t, src=shared[0:4])
        nisa.dma_copy(dst=shared[4:8], src=t)       # what it read reaches the output
    return shared


def test_race_check_reports_a_read_of_the_other_cores_unsynchronised_write():
    with pytest.raises(NkiValidationError, match="program 1 reads elements of shared HBM tensor .* that program 0 "
                                                 "wrote without a synchronisation") as info:
        read_without_barrier[2](X)
    assert re.search(LINE, str(info.value))


@nki.jit
def both_write_then_read_back(x, other_half_too):
    """Both cores write the same sum to one shared scratch and read it back (nki-library's qkv_tkg
    fused residual add, when too few rows to split); optionally core 1 also reads rows only core 0 wrote."""
    scratch = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    rows = x.shape[0] // 2 if other_half_too else x.shape[0]
    nisa.dma_compute(scratch[0:rows], (x[0:rows], x[0:rows]), scales=(1.0, 1.0), reduce_op=nl.add)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    if other_half_too and pid == 0:
        nisa.dma_copy(dst=scratch[rows:], src=x[rows:])
    nisa.dma_copy(dst=t, src=scratch)
    half = x.shape[0] // 2
    nisa.dma_copy(dst=out[pid * half:(pid + 1) * half], src=t[pid * half:(pid + 1) * half])
    return out


def test_reading_back_what_both_cores_wrote_alike_is_not_a_race():
    """Whichever core writes second leaves the values unchanged (checked: a warning), so the read is ordered."""
    with pytest.warns(nkisim.NkiRaceWarning, match="with the same values"):
        out = both_write_then_read_back[2](X, False)
    np.testing.assert_array_equal(out, 2 * X)


def test_reading_rows_only_the_other_core_wrote_is_still_a_race():
    with pytest.raises(NkiValidationError, match="program 1 reads elements of shared HBM tensor .* that program 0 "
                                                 "wrote without a synchronisation"):
        both_write_then_read_back[2](X, True)


@nki.jit
def zero_then_fill(x, differ_by_core, barrier_after):
    """Both cores zero one shared output, then write x into it (router_topk's unsharded LNC=2 scatter),
    plus the program id if `differ_by_core`; optionally a core_barrier after the fill."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    zeros = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.memset(dst=zeros, value=0.0)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if differ_by_core:
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(nl.program_id(0)))
    nisa.dma_copy(dst=out, src=zeros)
    nisa.dma_copy(dst=out, src=t)
    if barrier_after:
        nisa.core_barrier(data=out, cores=(0, 1))
        nisa.dma_copy(dst=out[nl.program_id(0) * 4:(nl.program_id(0) + 1) * 4], src=t[0:4])
    return out


def test_both_cores_zeroing_then_writing_the_same_values_is_order_independent():
    """Core 1's zeroing overwrites core 0's values, but each core's last write leaves the same values."""
    with pytest.warns(nkisim.NkiRaceWarning, match="each core's last write leaves the same values"):
        np.testing.assert_array_equal(zero_then_fill[2](X, False, False), X)


@pytest.mark.parametrize("barrier_after", [False, True])
def test_last_writes_that_differ_are_a_race_decided_when_the_epoch_ends(barrier_after):
    with pytest.raises(NkiValidationError, match="program 1 writes 32 elements of shared HBM tensor .* that program 0 "
                                                 "already wrote, with different values: on trn2 the two cores race "
                                                 "and the result depends on which writes last") as info:
        zero_then_fill[2](X, True, barrier_after)
    assert re.search(LINE, str(info.value))


@nki.jit
def overlap_after_barrier_then_race(x):
    shared = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((8, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x)
    if nl.program_id(0) == 0:
        nisa.dma_copy(dst=shared, src=t)
    nisa.core_barrier(data=shared, cores=(0, 1))
    nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=float(nl.program_id(0)))
    nisa.dma_copy(dst=shared, src=t)                   # both cores, same epoch, different values: a race
    return shared


def test_race_check_still_reports_concurrent_writes_after_a_barrier():
    with pytest.raises(NkiValidationError, match="program [01] writes .*elements of shared HBM tensor .* that program "
                                                 "[01] already wrote, with different values"):
        overlap_after_barrier_then_race[2](X)


@nki.jit
def one_sided_barrier(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    if nl.program_id(0) == 0:
        nisa.core_barrier(data=out, cores=(0, 1))
    return out


@nki.jit
def barrier_meets_sendrecv(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.sbuf)
    if nl.program_id(0) == 0:
        nisa.core_barrier(data=out, cores=(0, 1))
    else:
        nisa.sendrecv(src=t, dst=t, send_to_rank=0, recv_from_rank=0, pipe_id=0)
    return out


@nki.jit
def both_receive_first(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.sbuf)
    pid = nl.program_id(0)
    nisa.sendrecv(src=t, dst=t, send_to_rank=1 - pid, recv_from_rank=1 - pid, pipe_id=pid)   # pipes differ
    return out


@pytest.mark.parametrize("kernel, waits", [
    (one_sided_barrier, r"program 0 waits in core_barrier \(test_collectives\.py:\d+\) for program 1 to reach its "
                        r"core_barrier #1; program 1 has ended its kernel"),
    (barrier_meets_sendrecv, r"program 0 waits in core_barrier .*; program 1 waits in sendrecv "
                             r"\(test_collectives\.py:\d+\) for program 0's sendrecv to it on pipe_id=0"),
    (both_receive_first, r"program 0 waits in sendrecv .* pipe_id=0; program 1 waits in sendrecv .* pipe_id=1"),
])
def test_deadlocks_are_reported_not_hung(kernel, waits):
    with pytest.raises(NkiValidationError, match="deadlock between the LNC programs: " + waits):
        kernel[2](X)


def test_a_kernel_error_in_one_program_stops_the_other_waiting_one():
    @nki.jit
    def bad(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        if nl.program_id(0) == 0:
            nisa.core_barrier(data=out, cores=(0, 1))
        else:
            nisa.activation(dst=nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf), op=nl.exp,
                            data=nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf))
        return out
    with pytest.raises(NkiValidationError, match="partition dimension 256 exceeds maximum 128"):
        bad[2](X)


def test_collectives_need_lnc2_and_their_documented_operands(nki_version):
    def fails(body, match, lnc=2):
        @nki.jit
        def k(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            body(out)
            return out
        with pytest.raises(NkiValidationError, match=match) as info:
            k[lnc](X)
        assert re.search(LINE + "$", str(info.value)), str(info.value)

    if nki_versions.applies("core-barrier-lnc1"):     # valid at LNC=1 on trn2, but its partner is another launch
        fails(lambda out: nisa.core_barrier(data=out, cores=(0, 1)), r"at LNC=1, core_barrier waits for the kernel "
              r"the other physical core .* \(NKI 0\.7\.0 allows it at LNC 1 and 2: "
              r"\S+v2\.33\.0\S+core_barrier\.html\); nkisim emulates one launch at a time, so that partner is not "
              r"emulated", lnc=1)
    else:
        fails(lambda out: nisa.core_barrier(data=out, cores=(0, 1)), "needs an LNC=2 launch", lnc=1)
    fails(lambda out: nisa.core_barrier(data=nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf), cores=(0, 1)),
          "synchronises on a shared HBM tensor", lnc=1)
    fails(lambda out: nisa.core_barrier(data=out, cores=(0, 2)), r"only cores=\(0, 1\) is supported")
    fails(lambda out: nisa.core_barrier(data=nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.sbuf), cores=(0, 1)),
          "synchronises on a shared HBM tensor")
    t = lambda shape=(4, 4), dt=nl.float32: nl.ndarray(shape, dtype=dt, buffer=nl.sbuf)
    fails(lambda out: nisa.sendrecv(src=t(), dst=t(), send_to_rank=2, recv_from_rank=0, pipe_id=0),
          "send_to_rank=2; ranks of the cores sharing an HBM stack are 0 or 1")
    fails(lambda out: nisa.sendrecv(src=t(), dst=t(dt=nl.bfloat16), send_to_rank=0, recv_from_rank=0, pipe_id=0),
          "src dtype float32 != dst dtype bfloat16")
    fails(lambda out: nisa.sendrecv(src=t((4, 512)), dst=t((4, 512)), send_to_rank=0, recv_from_rank=0, pipe_id=0,
                                    dma_engine=nisa.dma_engine.gpsimd_dma), "gpsimd_dma moves at most 1024 bytes")


def test_lnc2_without_collectives_keeps_program_order():
    r = nkisim.run(ring_swap, X, lnc=2)
    first_of_1 = next(k for k, i in enumerate(r.trace.instructions) if i.program_id == 1)
    assert all(i.program_id == 0 for i in r.trace.instructions[:1])
    assert first_of_1 == 2          # program 0 ran until its sendrecv had to wait, then program 1 ran


@nki.jit
def write_what_the_other_read(x, same, used=True):
    """Program 0 reads rows 4:8 of the (shared) input and (used) returns them; program 1 overwrites them in place,
    unsynchronised, with zeros or (same) with the values they hold."""
    out = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.sbuf)
    if nl.program_id(0) == 0:
        nisa.dma_copy(dst=t, src=x[4:8])
        if not used:                    # the value read is masked out before it reaches the output
            nisa.memset(dst=t, value=1.0)
        nisa.dma_copy(dst=out, src=t)
    else:
        if same:
            nisa.dma_copy(dst=t, src=x[4:8])
        else:
            nisa.memset(dst=t, value=0.0)
        nisa.dma_copy(dst=x[4:8], src=t)
    return out


def test_race_check_reports_a_write_over_the_other_cores_unsynchronised_read():
    with pytest.raises(NkiValidationError, match="program 1 writes 16 elements of shared HBM tensor .* that program 0 "
                                                 "read without a synchronisation in between, with different values: "
                                                 "on trn2 the two cores race and that read may see the old or the new "
                                                 "values; .* disjoint rows, e.g. chosen by nl.program_id.* "
                                                 "nisa.core_barrier on both cores") as info:
        write_what_the_other_read[2](X.copy(), False)
    assert re.search(LINE, str(info.value))
    with pytest.warns(nkisim.NkiRaceWarning, match="program 0 read without a synchronisation in between, with the "
                                                   "same values: the result does not depend on the order"):
        write_what_the_other_read[2](X.copy(), True)


def test_a_raced_read_whose_value_reaches_no_output_is_a_warning():
    # nki-library's attention_block_tkg (LNC=2, update_cache): one core writes the new token's KV-cache slot while
    # the other reads the whole cache and masks that slot out; AWS runs it on trn2. The result is the same whichever
    # core goes first, which nkisim checks by running the launch again with program 1 first.
    x = X.copy()
    with pytest.warns(nkisim.NkiRaceWarning, match="that program 0 read without a synchronisation in between.*the "
                                                   "outputs are the same whichever core goes first"):
        out = write_what_the_other_read[2](x, False, used=False)
    assert np.array_equal(np.asarray(out), np.ones((4, 4), np.float32))
    assert not x[4:8].any() and np.array_equal(x[:4], X[:4])       # the in-place write landed once
    assert nkisim.last_trace().instructions[0].program_id == 0     # the trace is the program-0-first run's


@nki.jit
def read_what_the_other_wrote(x, used=True):
    """Program 0 writes x's rows 0:4 into out[0:4]; program 1 reads out[0:4] back, unsynchronised, and (used)
    stores it to out[4:8] or (not used) stores a constant there."""
    out = nl.ndarray((8, 4), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.sbuf)
    if nl.program_id(0) == 0:
        nisa.dma_copy(dst=t, src=x[0:4])
        nisa.dma_copy(dst=out[0:4], src=t)
    else:
        nisa.dma_copy(dst=t, src=out[0:4])
        if not used:
            nisa.memset(dst=t, value=2.0)
        nisa.dma_copy(dst=out[4:8], src=t)
    return out


def test_a_raced_read_of_the_other_cores_write_is_decided_by_the_outputs():
    with pytest.raises(NkiValidationError, match=r"dma_copy: program 1 reads elements of shared HBM tensor .* that "
                                                 r"program 0 wrote without a synchronisation in between"):
        read_what_the_other_wrote[2](X)
    with pytest.warns(nkisim.NkiRaceWarning, match="program 0 wrote without a synchronisation in between.*the "
                                                   "outputs are the same whichever core goes first"):
        out = read_what_the_other_wrote[2](X, False)
    assert np.array_equal(np.asarray(out), np.concatenate([X[0:4], np.full((4, 4), 2.0, np.float32)]))
    with pytest.warns(nkisim.NkiRaceWarning, match="a dry run cannot tell whether the value read reaches an output"):
        nkisim.run(read_what_the_other_wrote, X, lnc=2, dry_run=True)


@nki.jit
def strided_halves(x):
    """Each core writes every other column block of a 3-D shared output (strided, disjoint views)."""
    out = nl.ndarray((4, 8, 2), dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 4, 2), dtype=x.dtype, buffer=nl.sbuf)
    pid = nl.program_id(0)
    nisa.memset(dst=t, value=float(pid + 1))
    nisa.core_barrier(data=out, cores=(0, 1))
    nisa.dma_copy(dst=out[:, pid * 4:(pid + 1) * 4, :], src=t)
    return out


def test_race_check_tells_disjoint_strided_views_apart():
    got = strided_halves[2](X)
    assert np.all(got[:, :4] == 1) and np.all(got[:, 4:] == 2)


def _store_pid(cell):
    reg = nisa.register_alloc(nl.program_id(0) + 1)
    nisa.register_store(cell, reg)


def _write_then_register_load(cell):
    if nl.program_id(0) == 0:
        _store_pid(cell)
    else:
        nisa.register_load(nisa.register_alloc(), cell)


def _register_load_then_store(cell):
    if nl.program_id(0) == 0:
        nisa.register_load(nisa.register_alloc(), cell)
    else:
        _store_pid(cell)


def _dma_compute_pid(cell):
    t = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.memset(dst=t, value=nl.program_id(0) + 1)
    nisa.dma_compute(dst=cell, srcs=[t], reduce_op=nl.add)


def _write_then_dma_transpose(cell):
    if nl.program_id(0) == 0:
        _store_pid(cell)
    else:
        nisa.dma_transpose(dst=nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf), src=cell)


@pytest.mark.parametrize("body, match", [
    (_store_pid, r"register_store: program 1 writes 1 elements .* that program 0 already wrote, with different"),
    (_write_then_register_load, r"register_load: program 1 reads elements .* that program 0 wrote without"),
    (_register_load_then_store, r"register_store: program 1 writes 1 elements .* that program 0 read without"),
    (_dma_compute_pid, r"dma_compute: program 1 writes 1 elements .* that program 0 already wrote, with different"),
    (_write_then_dma_transpose, r"dma_transpose: program 1 reads elements .* that program 0 wrote without"),
], ids=["register_store", "register_load", "register_store_after_load", "dma_compute", "dma_transpose"])
def test_every_instruction_on_shared_hbm_takes_part_in_the_race_check(body, match):
    # two writes are an error; a raced read whose value reaches no output (these reads go nowhere) is a warning
    @nki.jit
    def k(x):
        cell = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.shared_hbm)
        body(cell)
        nisa.core_barrier(data=cell, cores=(0, 1))
        return cell

    if "already wrote" in match:
        with pytest.raises(NkiValidationError, match=match) as info:
            k[2](X)
        reported = str(info.value)
    else:
        with pytest.warns(nkisim.NkiRaceWarning, match=match) as seen:
            k[2](X)
        reported = next(str(w.message) for w in seen if re.search(match, str(w.message)))
    assert re.search(LINE, reported), reported


# --- indirect (index-addressed) shared-HBM accesses: checked by the elements their indices address ---
@nki.jit
def scatter_halves(x, rows):
    """Each program scatters its half of x into the rows of a shared output that its half of `rows`
    (a [4, 1] index tile per program) names."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    pid = nl.program_id(0)
    index = nl.ndarray((4, 1), dtype=rows.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=rows[pid * 4:(pid + 1) * 4])
    t = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=t, src=x[pid * 4:(pid + 1) * 4])
    nisa.dma_copy(dst=out.vector_select(0, index), src=t)
    return out


def test_race_check_follows_the_rows_an_indirect_scatter_writes():
    disjoint = np.array([1, 3, 5, 7, 0, 2, 4, 6], np.int32).reshape(8, 1)
    want = np.empty_like(X)
    want[disjoint[:, 0]] = X
    np.testing.assert_array_equal(scatter_halves[2](X, disjoint), want)
    overlapping = np.array([0, 1, 2, 3, 3, 4, 5, 6], np.int32).reshape(8, 1)    # both programs write row 3
    with pytest.raises(NkiValidationError, match=r"dma_copy: program 1 writes 4 elements of shared HBM tensor .* that "
                                                 r"program 0 already wrote, with different values") as info:
        scatter_halves[2](X, overlapping)
    assert re.search(LINE, str(info.value))
    nkisim.run(scatter_halves, X, overlapping, lnc=2, dry_run=True)    # no index values in a dry run: not checked


@nki.jit
def write_then_gather(x, rows):
    """Program 0 writes rows 0:4 of a shared tensor; program 1, unsynchronised, gathers the rows `rows` names
    into rows 4:8."""
    shared = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.sbuf)
    if nl.program_id(0) == 0:
        nisa.dma_copy(dst=t, src=x[0:4])
        nisa.dma_copy(dst=shared[0:4], src=t)
    else:
        index = nl.ndarray((4, 1), dtype=rows.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=rows)
        nisa.dma_copy(dst=t, src=shared.vector_select(0, index))
        nisa.dma_copy(dst=shared[4:8], src=t)       # the gathered rows reach the output
    return shared


def test_race_check_follows_the_rows_an_indirect_gather_reads():
    nkisim.run(write_then_gather, X, np.array([[4], [5], [6], [7]], np.int32), lnc=2)
    with pytest.raises(NkiValidationError, match=r"dma_copy: program 1 reads elements of shared HBM tensor .* that "
                                                 r"program 0 wrote without a synchronisation"):
        write_then_gather[2](X, np.array([[6], [7], [0], [5]], np.int32))


@nki.jit
def write_then_gather_transpose(table, indices):
    """Program 0 overwrites rows 0:16 of the shared table; program 1, unsynchronised, gather-transposes
    the 16 rows `indices` names into rows 16:32."""
    if nl.program_id(0) == 0:
        t = nl.ndarray((16, 4), dtype=table.dtype, buffer=nl.sbuf)
        nisa.memset(dst=t, value=1.0)
        nisa.dma_copy(dst=table[0:16], src=t)
    else:
        index = nl.ndarray(indices.shape, dtype=indices.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=index, src=indices)
        d = nl.ndarray((4, 16), dtype=table.dtype, buffer=nl.sbuf)
        nisa.dma_transpose(dst=d, src=table.ap(pattern=[[4, 16], [1, 4]], vector_offset=index, indirect_dim=0))
        nisa.dma_copy(dst=table[16:32], src=d)      # the transposed rows reach the (in-place) output


def test_race_check_follows_the_rows_an_indirect_dma_transpose_reads():
    table = np.zeros((32, 4), ml_dtypes.bfloat16)
    write_then_gather_transpose[2](table.copy(), np.arange(16, 32, dtype=np.uint32).reshape(16, 1))
    with pytest.raises(NkiValidationError, match=r"dma_transpose: program 1 reads elements of shared HBM tensor .* "
                                                 r"that program 0 wrote without a synchronisation"):
        write_then_gather_transpose[2](table.copy(), np.arange(15, 31, dtype=np.uint32).reshape(16, 1))


@nki.jit
def scatter_add_halves(table, rows):
    """Each program adds 1 to the rows of the shared table (in place) that its half of `rows` names:
    dma_compute's scatter read-modify-write."""
    pid = nl.program_id(0)
    index = nl.ndarray((2, 1), dtype=rows.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=index, src=rows[pid * 2:(pid + 1) * 2])
    ones = nl.ndarray((2, 4), dtype=table.dtype, buffer=nl.sbuf)
    nisa.memset(dst=ones, value=1.0)
    view = table.ap(pattern=[[4, 2], [1, 4]], vector_offset=index, indirect_dim=0)
    nisa.dma_compute(dst=view, srcs=[view, ones], reduce_op=nl.add)


def test_race_check_follows_the_rows_a_scatter_read_modify_write_touches():
    table = X.copy()
    scatter_add_halves[2](table, np.array([[1], [6], [2], [5]], np.uint32))
    want = X.copy()
    want[[1, 6, 2, 5]] += 1
    np.testing.assert_array_equal(table, want)
    with pytest.raises(NkiValidationError, match=r"dma_compute: program 1 reads elements of shared HBM tensor .* that "
                                                 r"program 0 wrote without a synchronisation"):
        scatter_add_halves[2](X.copy(), np.array([[1], [6], [6], [5]], np.uint32))
