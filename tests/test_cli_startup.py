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


def test_a_command_scans_no_plugins_nor_package_metadata(tmp_path):
    """Option values are converted without pydantic (cli/plain_params.py) and CRC-32C is loaded
    without the crc32c package's look-up of its own version (record/crc.py): neither pydantic
    (~0.15 CPU-s with its adapters) nor importlib.metadata (~0.05) is imported by a command."""
    d = tmp_path / "d"
    subprocess.run([sys.executable, "-m", "compactlog", "--data-dir", str(d), "topics", "create", "--topic", "t"],
                   check=True, capture_output=True, timeout=60)
    probe = PROBE.replace("m.split('.')[0] in %r" % (HEAVY,), "m in ('pydantic', 'importlib.metadata', 'rich')")
    for args in (["topics", "list"], ["consume", "--topic", "t", "--partition", "0", "--offset", "0"],
                 ["verify"]):
        r = subprocess.run([sys.executable, "-c", probe, "--data-dir", str(d), *args], capture_output=True,
                           text=True, timeout=60)
        assert json.loads(r.stderr.strip().splitlines()[-1]) == [], (args, r.stderr[-2000:])


def test_commands_on_a_small_dir_load_neither_numba_nor_pandas(tmp_path):
    """A command on a small dir answers in ~0.3 s: its kernels run in plain Python (numba's import
    and cached-code load alone cost ~0.4 s; record/jit.py) and nothing pulls pandas in (0.2 s)."""
    d = str(tmp_path / "d")
    cli = [sys.executable, "-m", "compactlog", "--data-dir", d]
    subprocess.run([*cli, "topics", "create", "--topic", "t", "--partitions", "2", "--config",
                    "cleanup.policy=compact"], check=True, capture_output=True, timeout=60)
    records = "".join(f"k{i % 20}:v{i}\n" for i in range(200))
    for _ in range(2):
        subprocess.run([*cli, "produce", "--topic", "t", "--property", "parse.key=true", "--property",
                        "key.separator=:"], input=records, text=True, check=True, capture_output=True, timeout=60)
    subprocess.run([*cli, "clean", "--force", "--roll", "--topic", "t"], check=True, capture_output=True, timeout=120)
    probe = PROBE.replace("%r" % (HEAVY,), "('numba', 'pandas')")
    for args in (["produce", "--topic", "t", "--property", "parse.key=true", "--property", "key.separator=:"],
                 ["consume", "--topic", "t", "--from-beginning"],
                 ["consume", "--topic", "t", "--partition", "1", "--offset", "3"],
                 ["topics", "describe", "--topic", "t"],
                 ["get-offsets", "--topic", "t"],
                 ["verify"],
                 ["dump-log", "--files", f"{d}/t-0/00000000000000000000.log", "--print-data-log"]):
        r = subprocess.run([sys.executable, "-c", probe, "--data-dir", d, *args], input="k:v\n", capture_output=True,
                           text=True, timeout=60)
        assert json.loads(r.stderr.strip().splitlines()[-1]) == [], (args, r.stderr[-2000:])
