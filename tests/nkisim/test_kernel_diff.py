"""nkisim.show_kernel_diff: the change between two kernel versions, as text and as a rendered diff."""
from __future__ import annotations

import pytest

import nkisim

nkisim.install()

import nki  # noqa: E402
import nki.isa as nisa  # noqa: E402
import nki.language as nl  # noqa: E402


@nki.jit
def copy_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    nisa.dma_copy(dst=out, src=tile)
    return out


@nki.jit
def gelu_kernel(x):
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tile = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.dma_copy(dst=tile, src=x)
    nisa.activation(dst=tile, op=nl.gelu, data=tile)
    nisa.dma_copy(dst=out, src=tile)
    return out


def test_a_jit_kernel_change_is_one_added_line_and_the_renamed_def():
    diff = nkisim.show_kernel_diff(copy_kernel, gelu_kernel)
    assert diff.header() == "copy_kernel -> gelu_kernel: +2 -1 lines"
    assert "+    nisa.activation(dst=tile, op=nl.gelu, data=tile)" in diff.lines
    assert "-def copy_kernel(x):" in diff.lines and "+def gelu_kernel(x):" in diff.lines
    assert not any(line.startswith(("---", "+++")) for line in diff.lines), "file headers are dropped"
    assert repr(diff).splitlines()[0] == diff.header()


def test_the_rendered_form_is_a_diff_block():
    markdown = nkisim.show_kernel_diff(copy_kernel, gelu_kernel)._repr_markdown_()
    assert markdown.startswith("**copy_kernel -> gelu_kernel: +2 -1 lines**\n\n```diff\n")
    assert markdown.endswith("\n```")


def test_sources_and_labels():
    diff = nkisim.show_kernel_diff("a = 1\nb = 2\n", "a = 1\nb = 3\n", context=0, before_label="v1", after_label="v2")
    assert diff.header() == "v1 -> v2: +1 -1 lines"
    assert diff.lines == ("@@ -2 +2 @@", "-b = 2", "+b = 3")
    same = nkisim.show_kernel_diff(copy_kernel, copy_kernel)
    assert str(same) == "copy_kernel -> copy_kernel: +0 -0 lines (identical)"


def test_bad_input_is_named():
    with pytest.raises(ValueError, match="context=-1"):
        nkisim.show_kernel_diff(copy_kernel, gelu_kernel, context=-1)
    with pytest.raises(TypeError, match=r"show_kernel_diff: after must be a kernel, a function, a module or a "
                                        r"source string, got int 42"):
        nkisim.show_kernel_diff(copy_kernel, 42)
