import sys
from pathlib import Path

import matplotlib

import nkisim

matplotlib.use("Agg")
sys.path.insert(0, str(Path(__file__).parent))   # tracebuild
nkisim.install()                                  # tests with real kernels import `nki` the real way
