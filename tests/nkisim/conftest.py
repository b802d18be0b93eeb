"""The emulator's tests import `nki` the real way; install() makes that resolve to nkisim."""
import nkisim

nkisim.install()
