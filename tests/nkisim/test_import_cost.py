"""`import kernels` and `import nkisim` do not import matplotlib; the profile views load it on first use."""
import subprocess
import sys

PROBE = """
import sys
import kernels, nkisim
before = 'matplotlib' in sys.modules
nkisim.show_timeline   # first use of a view
print(before, 'matplotlib' in sys.modules)
"""


def test_matplotlib_loads_only_when_a_view_is_used():
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["False", "True"]
