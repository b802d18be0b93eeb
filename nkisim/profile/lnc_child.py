"""The child process of `nkisim.profile(..., lnc=n)` on trn2 (see nkisim/profile/lnc_process.py):
started with NEURON_LOGICAL_NC_CONFIG=n, it profiles the launch and writes the summary back.

    python -m nkisim.profile.lnc_child PAYLOAD RESULT
"""
from __future__ import annotations

import dataclasses
import pickle
import sys
from pathlib import Path

import torch

from nkisim.active_backend import install
from nkisim.profile.lnc_process import rebuild
from nkisim.profile.profiling import profile


def main(payload: str, result: str) -> int:
    install()
    job = torch.load(payload, weights_only=False)
    summary = profile(rebuild(job["kernel"]), *job["args"], lnc=job["lnc"], **job["kwargs"])
    Path(result).write_bytes(pickle.dumps(dataclasses.replace(summary, timeline=None)))
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
