"""Small kernels that each make one mistake, for the troubleshooting page (book/troubleshooting.ipynb).

They live in a file, not in notebook cells, so the error messages end with a readable
"troubleshooting_kernels.py:LINE" location, as they would for a learner's kernel file.
"""
import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def whole_tensor_as_one_tile(x):
    """Stages all rows of x in one SBUF tile: fails for more than 128 rows."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    nisa.activation(dst=tile, op=nl.gelu, data=tile)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def oversized_staging(x):
    """Allocates a 256 KiB-per-partition staging buffer: more than SBUF holds."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    staging = nl.ndarray((128, 64 * 1024), dtype=nl.float32, buffer=nl.sbuf)
    nisa.dma_copy(dst=staging[:, 0:x.shape[1]], src=x)
    nisa.dma_copy(dst=out, src=staging[:, 0:x.shape[1]])
    return out


@nki.jit
def old_style_mask(x):
    """Passes `mask=`, an argument of the pre-0.1 NKI API."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    nisa.activation(dst=tile, op=nl.gelu, data=tile, mask=None)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def store_from_psum(x):
    """DMAs a PSUM tile straight to HBM."""
    out = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.shared_hbm)
    acc = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
    nisa.memset(dst=acc, value=0.0)
    nisa.dma_copy(dst=out, src=acc)
    return out


@nki.jit
def casting_hwdge_load(x):
    """Loads fp32 into a bf16 tile with hardware descriptor generation."""
    out = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=nl.bfloat16, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x, dge_mode=nisa.dge_mode.hwdge)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def partial_load(x):
    """Loads only the first 100 rows but computes and stores all 128."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile[0:100], src=x[0:100])
    nisa.activation(dst=tile, op=nl.gelu, data=tile)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def output_in_sbuf(x):
    """Returns an SBUF tile instead of an HBM tensor."""
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    return tile


@nki.jit
def dynamic_trip_count(x, n):
    """A device-side loop written with nl.dynamic_range, which NKI 0.7 removed."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    count = nl.ndarray((1, 1), dtype=nl.int32, buffer=nl.sbuf)
    nisa.dma_copy(dst=count, src=n)
    trips = nisa.register_alloc()
    nisa.register_load(trips, count)
    for _ in nl.dynamic_range(trips):
        nisa.tensor_scalar(dst=tile, data=tile, op0=nl.add, operand0=1.0)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def ping_pong_by_python(x, n):
    """A compiled loop whose body swaps its two tiles by Python state: the device runs one copy of the body."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    a = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    b = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=a, src=x)
    tiles = [a, b]

    def step(i):
        src, dst = tiles
        nisa.tensor_scalar(dst=dst, data=src, op0=nl.add, operand0=1.0)
        tiles.reverse()     # Python state: runs once on device, not once per iteration

    nl.fori_loop(0, n, step)
    nisa.dma_copy(dst=out, src=tiles[0])
    return out


@nki.jit
def keeps_the_body_tile(x, n):
    """A fori_loop body that declares its result tile and leaves it for after the loop."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    acc = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=acc, src=x)
    made = []

    def step(i):
        doubled = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)    # declared in the body
        nisa.tensor_tensor(dst=doubled, data1=acc, data2=acc, op=nl.add)
        nisa.tensor_copy(dst=acc, src=doubled)
        made.append(doubled)

    nl.fori_loop(0, n, step)
    nisa.dma_copy(dst=out, src=made[-1])     # the body's tile, after the loop
    return out


def _scale_of(factor):
    """A helper with `is`: plain Python under NKI 0.7, refused by NKI 0.6's front end."""
    return 1.0 if factor is None else factor


@nki.jit
def scaled_copy(x, factor=None):
    """Copies x times factor (1 when None)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    nisa.tensor_scalar(dst=tile, data=tile, op0=nl.multiply, operand0=_scale_of(factor))
    nisa.dma_copy(dst=out, src=tile)
    return out


def launch_on_one_core(x):
    """Launches scaled_copy as kernel[1] whatever the process's LNC is."""
    return scaled_copy[1](x)
