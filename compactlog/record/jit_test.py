"""Kernels that run in plain Python on small work: the same results as the compiled kernels, and a
small read that never imports numba.

The differential fixture runs every call of a Python-capable kernel twice, its Python body and
numba's dispatcher, on copies of the arguments, and compares the results and every array the call
wrote. The calls come from the real paths (produce, read, verify, dump-log's decode) over Kafka's
own segment files, generated logs with headers, null keys and odd timestamps, and damaged copies.
"""

from __future__ import annotations

import collections
import glob
import os
import random
import shutil
import subprocess
import sys

import numpy as np
import pytest

import compactlog
from compactlog.errors import CompactlogError
from compactlog.record import jit, kernels
from compactlog.record.batch import iter_batches
from compactlog.storage.datadir import DataDir
from compactlog.storage.verify import read_checkpoints, verify_partition

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KAFKA_DIRS = [d for d in glob.glob(os.path.join(ROOT, "tests", "data", "kafka-vectors", "*", "**", "*-[0-9]*"),
                                   recursive=True) if glob.glob(os.path.join(d, "*.log"))]

def _copy(value):
    if isinstance(value, np.ndarray):
        c = value.copy()
        c.flags.writeable = value.flags.writeable    # the same numba specialization
        return c
    return value


def _same(a, b) -> bool:
    if isinstance(a, tuple):
        return isinstance(b, tuple) and len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if a is None or b is None:
        return a is b
    return int(a) == int(b)


@pytest.fixture
def differential(monkeypatch):
    """Every Python-capable kernel call checked against numba's; the counts of calls checked."""
    checked = collections.Counter()
    real_call = jit.Kernel.__call__

    def both(self, *args):
        if self.work is None or jit._in_python.value:
            return real_call(self, *args)
        py_args = [_copy(a) for a in args]
        jit_args = [_copy(a) for a in args]
        try:
            py_result = self.python(*py_args)
        except (IndexError, ValueError) as e:         # numba reads unchecked; Python must not differ
            pytest.fail(f"{self.__name__} raised {e!r} in Python")
        jit_result = self.dispatcher(*jit_args)
        assert _same(py_result, jit_result), f"{self.__name__}: {py_result} != {jit_result}"
        for i, (p, j) in enumerate(zip(py_args, jit_args)):
            if isinstance(p, np.ndarray):
                assert np.array_equal(p, j), f"{self.__name__}: argument {i} differs"
        checked[self.__name__] += 1
        return self.dispatcher(*args)

    monkeypatch.setattr(jit.Kernel, "__call__", both)
    return checked


def _verify(path: str) -> list:
    """verify's checks over every partition of the dir: the problems found."""
    dd = DataDir(path)
    checkpoints, problems = read_checkpoints(path)
    for topic in dd.topics():
        for p in dd.partitions(topic):
            problems += verify_partition(path, topic, p, dd.topic_config(topic), checkpoints)
    return problems


def _produce(path: str, seed: int, records: int = 300) -> None:
    rng = random.Random(seed)
    with compactlog.open(path, write=True, create=True) as log:
        log.create_topic("t", partitions=2, configs={"segment.bytes": "8192"})
        log.create_topic("plain", partitions=1)
        for i in range(records):
            key = None if i % 17 == 0 else bytes(rng.randrange(256) for _ in range(rng.choice((0, 1, 9, 130))))
            value = None if i % 13 == 0 else b"v" * rng.choice((0, 1, 63, 64, 200, 3000))
            headers = [("h%d" % h, None if h == 2 else b"x" * rng.randrange(0, 140))
                       for h in range(rng.choice((0, 0, 1, 3)))]
            ts = rng.choice((0, 1, 1_700_000_000_000, 2**40))
            if key is not None:
                log.send("t", key, value, headers=headers, timestamp=ts)
            log.send("plain", key, value, headers=headers, timestamp=ts)
        log.flush()


def _arrow_headers(seed: int) -> None:
    """The producer's header encoder over Arrow lists (what the Spark sink and send paths use)."""
    import pyarrow as pa
    from compactlog.producer import HEADERS_TYPE, encode_arrow_headers
    rng = random.Random(seed)
    lists = [None if i % 7 == 0 else
             [{"key": "k" * rng.randrange(0, 150), "value": None if rng.random() < 0.2 else b"x" * rng.randrange(0, 300)}
              for _ in range(rng.randrange(0, 4))] for i in range(200)]
    encode_arrow_headers(pa.array(lists, HEADERS_TYPE).slice(3))


def _read_everything(path: str) -> None:
    with compactlog.open(path) as log:
        for topic in log.topics():
            for p in log.partitions(topic):
                list(log.read(topic, p))
                list(log.read(topic, p, offset=5))
                log.end_offsets(topic)


def test_produce_read_verify_agree_with_numba(tmp_path, differential):
    data = str(tmp_path / "d")
    _produce(data, seed=1)
    _arrow_headers(seed=1)
    _read_everything(data)
    assert _verify(data) == []
    assert {"scan_records", "last_batch_end", "_walk", "encode_records_memcpy", "_murmur2_partitions",
            "_header_sizes", "_write_headers"} <= set(differential), differential


def test_kafka_segments_agree_with_numba(tmp_path, differential):
    assert KAFKA_DIRS, "the Kafka fixture dirs are missing"
    for n, src in enumerate(KAFKA_DIRS):
        root = tmp_path / str(n)
        root.mkdir()
        shutil.copytree(src, root / os.path.basename(src))
        _verify(str(root))
        for log_file in glob.glob(os.path.join(str(root), "*", "*.log")):
            with open(log_file, "rb") as f:
                raw = f.read()
            for batch in iter_batches(raw):
                try:
                    batch.records()
                except CompactlogError:
                    continue
                cols = batch.columns()
                keyed = cols.key_len >= 0
                h1 = np.zeros(int(keyed.sum()), np.uint64)
                kernels.hash_keys(cols.data, cols.key_pos[keyed], cols.key_len[keyed], h1, h1.copy())
    assert {"scan_records", "_walk", "hash_keys"} <= set(differential), differential


def test_damaged_segments_agree_with_numba(tmp_path, differential):
    """Flipped and cut bytes: the Python bodies return the same error codes and positions."""
    data = str(tmp_path / "d")
    _produce(data, seed=2)
    logs = sorted(glob.glob(os.path.join(data, "t-0", "*.log")))
    original = open(logs[0], "rb").read()
    rng = random.Random(7)
    for trial in range(30):
        damaged = bytearray(original)
        if trial % 3 == 0:
            damaged = damaged[:rng.randrange(1, len(damaged))]
        for _ in range(rng.randrange(1, 4)):
            if damaged:
                damaged[rng.randrange(len(damaged))] = rng.randrange(256)
        with open(logs[0], "wb") as f:
            f.write(damaged)
        _verify(data)
        try:
            for batch in iter_batches(bytes(damaged)):
                try:
                    batch.records()
                except CompactlogError:
                    pass
        except CompactlogError:
            pass
    assert {"scan_records", "_walk"} <= set(differential), differential


def _run_probe(code: str, data: str) -> str:
    """stdout of ``code`` run in a fresh interpreter on ``data`` (kernel mode: the default, less
    the ahead-of-time kernels, whose calls never load numba: aot_test.py)."""
    env = {k: v for k, v in os.environ.items() if k != "COMPACTLOG_KERNELS"}
    env["COMPACTLOG_AOT"] = "0"
    r = subprocess.run([sys.executable, "-c", code, data], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_small_work_runs_in_python_and_large_work_compiles(tmp_path):
    """A read of a small dir never imports numba; past the budget every kernel runs compiled."""
    data = str(tmp_path / "d")
    _produce(data, seed=3, records=40)
    probe = ("import sys, compactlog\n"
             "from compactlog.record import jit\n"
             "log = compactlog.open(sys.argv[1])\n"
             "n = sum(1 for p in log.partitions('t') for _ in log.read('t', p))\n"
             "print(n, 'numba' in sys.modules, jit.compiled())\n")
    small = _run_probe(probe, data)
    count, numba_loaded, compiled = small.split()
    assert int(count) > 0 and numba_loaded == "False" and compiled == "False", small
    big = _run_probe("import compactlog.record.jit as j; j.PYTHON_BUDGET = 0\n" + probe, data)
    assert big.split()[0] == count and big.split()[1:] == ["True", "True"], big


def test_the_collector_is_paused_while_numba_loads_and_on_again_after():
    """numba's import and first kernel load run without a collection (they made ~190 of them,
    each walking numba's new objects); the collector is enabled again after the call."""
    probe = ("import gc, sys, numpy as np\n"
             "import compactlog.record.jit as j; j.PYTHON_BUDGET = 0\n"
             "from compactlog.record import kernels as K\n"
             "h1, h2 = np.zeros(1, np.uint64), np.zeros(1, np.uint64)\n"
             "before = sum(s['collections'] for s in gc.get_stats())\n"
             "K.hash_keys(np.frombuffer(b'key', np.uint8), np.zeros(1, np.int64), np.full(1, 3, np.int32), h1, h2)\n"
             "after = sum(s['collections'] for s in gc.get_stats())\n"
             "print(j.compiled(), after - before, gc.isenabled(), int(h1[0]) != 0)\n")
    compiled, collections, enabled, hashed = _run_probe(probe, "-").split()
    # 192 collections during that call before; one is the collection due when it is re-enabled
    assert compiled == "True" and int(collections) <= 1 and enabled == "True" and hashed == "True"


def test_a_thread_that_must_not_wait_runs_a_kernel_in_python_instead_of_loading_numba():
    """``without_numba``: past the budget a call there runs the kernel's Python body (the same
    result), numba stays unloaded and the kernel is named; outside it, the same call loads numba."""
    probe = ("import sys, numpy as np\n"
             "import compactlog.record.jit as j; j.PYTHON_BUDGET = 0\n"
             "from compactlog.record import kernels as K\n"
             "def digest():\n"
             "    h1, h2 = np.zeros(1, np.uint64), np.zeros(1, np.uint64)\n"
             "    K.hash_keys(np.frombuffer(b'key', np.uint8), np.zeros(1, np.int64), np.full(1, 3, np.int32), h1, h2)\n"
             "    return int(h1[0]), int(h2[0])\n"
             "with j.without_numba(record=True) as missed:\n"
             "    inside = digest()\n"
             "print(sorted(missed), 'numba' in sys.modules)\n"
             "outside = digest()\n"
             "print(inside == outside, 'numba' in sys.modules, j.compiled())\n")
    first, second = _run_probe(probe, "-").splitlines()
    assert first == "['compactlog.record.kernels.hashing.hash_keys'] False", first
    assert second == "True True True", second


def test_an_unknown_mode_is_named_and_auto_used():
    r = subprocess.run([sys.executable, "-c", "import compactlog.record.jit as j; print(j._mode)"],
                       capture_output=True, text=True, env={**os.environ, "COMPACTLOG_KERNELS": "fast"}, timeout=60)
    assert r.returncode == 0 and r.stdout.strip() == "auto", r
    assert "COMPACTLOG_KERNELS='fast' is not one of auto, jit, python" in r.stderr


def test_threads_switching_to_numba_mid_read_agree(tmp_path):
    """The switch to compiled kernels happens while other threads read: every read still complete."""
    data = str(tmp_path / "d")
    _produce(data, seed=4, records=150)
    probe = ("import sys, threading, compactlog\n"
             "import compactlog.record.jit as j\n"
             "j.PYTHON_BUDGET = 40_000\n"
             "log = compactlog.open(sys.argv[1])\n"
             "counts = []\n"
             "def read():\n"
             "    for _ in range(3):\n"
             "        counts.append(sum(1 for p in log.partitions('t') for _ in log.read('t', p)))\n"
             "threads = [threading.Thread(target=read) for _ in range(4)]\n"
             "[t.start() for t in threads]; [t.join() for t in threads]\n"
             "print(sorted(set(counts)), len(counts), j.compiled())\n")
    out = _run_probe(probe, data)
    distinct, reads, compiled = out.rsplit(" ", 2)
    assert reads == "12" and compiled.strip() == "True" and len(eval(distinct)) == 1, out
