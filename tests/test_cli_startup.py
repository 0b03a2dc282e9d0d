"""`compactlog --help` and `topics list` stay fast (measured ~0.15 s here) because they import
nothing heavy: no numba kernels, no Arrow, no Spark, no kio. Checked by the modules loaded (a
timing would depend on the machine's load)."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = ("numba", "pyarrow", "pyspark", "kio", "numpy", "confluent_kafka", "kafka", "deltalake")
PROBE = """
import json, sys
from compactlog.cli.main import main
code = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in %r)), file=sys.stderr)
""" % (HEAVY,)


def loaded_by(*args) -> list[str]:
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60)
    return json.loads(r.stderr.strip().splitlines()[-1])


def test_help_imports_nothing_heavy():
    assert loaded_by("--help") == []
    assert loaded_by("topics", "--help") == []
    assert loaded_by("transactions", "--help") == []
    assert loaded_by("configs", "--help") == []
    assert loaded_by("metadata", "--help") == []
    assert loaded_by("consume", "--help", "--data-dir", "/nowhere") == []


def test_topics_list_imports_nothing_heavy(tmp_path):
    d = tmp_path / "d"
    subprocess.run([sys.executable, "-m", "compactlog", "--data-dir", str(d), "topics", "create", "--topic", "t"],
                   check=True, capture_output=True, timeout=60)
    assert loaded_by("--data-dir", str(d), "topics", "list") == []
