"""A stop signal that lands where Python cannot raise its exception (a weakref callback, as importlib's module-lock
callback during an import) still ends gpuplan with the signal's code and line, and no traceback (optimizer/stops.py
``_on_unraisable``; CI once saw SIGTERM land in ``<frozen importlib._bootstrap>``'s ``cb`` while a chart was drawn)."""

from __future__ import annotations

import os
import subprocess
import sys

from paths import ROOT

SCRIPT = """
import os, signal, time, weakref
from optimizer import stops
stops.install(raising=True)

class Thing:
    pass

def callback(_ref):
    os.kill(os.getpid(), signal.SIGTERM)  # the handler runs here, inside a callback Python cannot raise from
    time.sleep(0.5)

thing = Thing()
ref = weakref.ref(thing, callback)
del thing
time.sleep(2)
print("carried on")
"""


def test_a_stop_raised_inside_a_weakref_callback_ends_the_process_with_its_line():
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 143, (proc.returncode, proc.stderr)
    assert proc.stderr.strip().endswith("terminated") and "Traceback" not in proc.stderr, proc.stderr
    assert "carried on" not in proc.stdout
