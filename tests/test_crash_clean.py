"""kill -9 at random points of a clean (fault injection at file-system steps and random delays)."""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def test_kill_during_clean_leaves_before_or_after_state():
    p = subprocess.run([sys.executable, os.path.join(HERE, "crash_harness.py"), "--trials", "60",
                        "--steps", "40", "--seed", "11"], capture_output=True, text=True, timeout=600)
    summary = p.stdout.strip().splitlines()[-1] if p.stdout.strip() else ""
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-2000:]
    assert "0 failures" in summary
    trials = int(summary.split()[0])
    assert trials >= 50
    # both outcomes must occur, or the crash points did not straddle the swap
    assert "'before'" in summary and "'after'" in summary
