"""trn2 (NeuronCore-v3) hardware limits, each defined once for the emulator and the cost model.

`kernels/limits.py` keeps its own copy of the few the kernels need (they must import on a trn2
instance without nkisim); tests/nkisim/test_limits.py checks that the two agree.
"""
from __future__ import annotations

# SBUF/PSUM partitions, = nl.tile_size.pmax (SDK:nki/guides/architecture/trainium2_arch.rst).
PARTITIONS = 128
# Physical SBUF per partition: 28 MiB / 128 = 224 KiB (SDK:nki/guides/architecture/trainium2_arch.rst:
# "28MiB (or, 128 partitions of 224KiB)").
SBUF_BYTES_PER_PARTITION = 224 * 1024
# nki-library's usable SBUF per partition on trn2 (physical minus compiler reservations;
# nki-library mlp_cte_constants.py). The emulator's SBUF capacity check uses this figure.
SBUF_USABLE_BYTES_PER_PARTITION = 212_728
# Elements per partition one instruction's access pattern may cover, per on-chip buffer.
FREE_ELEMENTS_MAX = {"sbuf": 65536, "psum": 4096}
# Compute-engine access patterns on SBUF/PSUM (SDK:nki/guides/architecture/trainium_inferentia2_arch.rst,
# "Accessing SBUF/PSUM tensors using compute engines"): consecutive partitions (no partition striding),
# a start partition allowed by the partition count, at most 4 free dimensions, int16 element strides.
# (partition count up to, allowed start partitions), smallest first.
START_PARTITIONS = ((32, (0, 32, 64, 96)), (64, (0, 64)), (128, (0,)))
FREE_DIMS_MAX = 4
FREE_STRIDE_RANGE = (-(1 << 15), (1 << 15) - 1)
# Lanes of the Scalar engine's activation accumulator (one per partition).
ACCUMULATOR_LANES = PARTITIONS
# PSUM: 16 KiB per partition in 8 banks of 2 KiB (512 fp32); a PSUM tile fits one bank
# (SDK:nki/guides/architecture/trainium_inferentia2_arch.rst "Near-memory accumulation in PSUM";
# SDK:nki/get-started/about/tiling-overview.rst tile-size constraint #2).
PSUM_BANKS = 8
PSUM_BANK_BYTES = 2048
# nl.tile_size.psum_min_align, "minimum byte alignment requirement for PSUM free dimension address": its value is
# unpublished, 4 bytes (one fp32) is nkisim's guess.
PSUM_MIN_ALIGN = 4
# Tensor engine tile limits (SDK:nki/get-started/about/tiling-overview.rst tile-size constraint #3):
# stationary free size (PE columns), moving free size (one PSUM bank of fp32 on NeuronCore-v3).
GEMM_STATIONARY_FMAX = 128
# Row / column tiling of the 128 x 128 PE array (nc_matmul, "Tiling mode"): 4 x 32 or 2 x 64 (NeuronCore-v3), or
# the whole array; a tile is (first row, first column, rows, columns), an untiled matmul's the whole array.
PE_TILE_SIZES = (32, 64, 128)
WHOLE_PE_ARRAY = (0, 0, 128, 128)
GEMM_MOVING_FMAX = 512
