"""The emulator's tests import `nki` the real way; install() makes that resolve to nkisim.

`nki_version` runs a test once per emulated NKI version; `nki_0_6` runs it under NKI 0.6 only
(for the constructs NKI 0.7 removed), `nki_0_7` under NKI 0.7 only (for what NKI 0.7 adds)."""
import pytest

import nkisim
from nkisim.emulator import nki_versions

nkisim.install()


@pytest.fixture(params=nki_versions.VERSIONS)
def nki_version(request):
    with nki_versions.emulating(request.param) as version:
        yield version


@pytest.fixture
def nki_0_6():
    with nki_versions.emulating(nki_versions.V06) as version:
        yield version


@pytest.fixture
def nki_0_7():
    with nki_versions.emulating(nki_versions.V07) as version:
        yield version
