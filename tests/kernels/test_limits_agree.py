"""kernels/limits.py keeps its own copy of the trn2 limits the kernels need (they import on a trn2
instance without nkisim); the copy must agree with nkisim.limits, where each is defined once."""
from kernels import limits as kernel_limits
from nkisim import limits


def test_the_kernels_copy_of_the_trn2_limits_agrees_with_nkisim():
    assert kernel_limits.PMAX == limits.PARTITIONS
    assert kernel_limits.SBUF_USABLE_BYTES == limits.SBUF_USABLE_BYTES_PER_PARTITION


def test_nki_language_tile_sizes_come_from_the_same_limits():
    import nki.language as nl

    assert nl.tile_size.pmax == limits.PARTITIONS
    assert nl.tile_size.sbuf_fmax_bytes == limits.SBUF_USABLE_BYTES_PER_PARTITION
