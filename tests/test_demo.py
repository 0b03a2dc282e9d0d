"""`make demo`: the seed walkthrough end to end through a real client (confluent-kafka) against
`compactlog serve`, the broker's cleaner on Spark."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest


# local: the in-process cleaner acts within milliseconds, so the first read must not race it
@pytest.mark.parametrize("engine", ["spark", "local"])
def test_seed_walkthrough(tmp_path, engine):
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    p = subprocess.run([sys.executable, "-m", "compactlog.demo", "--data-dir", str(tmp_path / "demo"),
                        "--engine", engine], capture_output=True, text=True, env=env, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    out = p.stdout
    before = out.split("before cleaning:")[1].split("...")[0]
    after = out.split("after cleaning:")[1].split("$ cat")[0]
    assert before.count(".log") == 7, before          # one segment per record
    assert after.count(".log") == 2, after            # cleaned group + active segment
    assert "0\n1\nlatest-product-price 0 6\n" in out  # the cleaner-offset-checkpoint
    first, final = [part.split("\n\n")[0] for part in out.split("poll until the end")[1:]]
    assert [line.split()[-1] for line in first.splitlines()[1:]] == \
        ["p3:10$", "p5:7$", "p3:11$", "p6:25$", "p6:12$", "p5:14$", "p5:17$"]
    assert [line.split()[-1] for line in final.splitlines()[1:]] == ["p3:11$", "p6:12$", "p5:14$", "p5:17$"]
    ran = {"spark": "(spark)", "local": "(in-process)"}[engine]     # the broker's "Cleaned log" line
    assert ran in out and "clean shutdown marker: True" in out
