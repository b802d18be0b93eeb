"""Shared fixtures for the kernels tests."""
from __future__ import annotations

import pytest


@pytest.fixture
def lnc2(monkeypatch: pytest.MonkeyPatch) -> int:
    """Run the fold op on both physical cores of a logical core, as on a default trn2."""
    monkeypatch.setenv("NEURON_LOGICAL_NC_CONFIG", "2")
    return 2
