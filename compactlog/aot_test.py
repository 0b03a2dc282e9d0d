"""The kernels compiled ahead of time (``aot.py``): the same bytes as numba's JIT, chosen by
the argument types numba would choose by, and never used once a kernel's source changed.

The extension is built by ``make venv`` (``python -m compactlog.aot``); these tests use the
checkout's build and skip, saying so, where it could not be built.
"""

from __future__ import annotations

import filecmp
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from compactlog import aot
from compactlog.record import jit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOW = 1_900_000_000_000

_WHY = aot.unusable_reason()
needs_build = pytest.mark.skipif(_WHY is not None, reason=_WHY or "")


def _values():
    base = np.arange(24, dtype=np.int64)
    ro = np.frombuffer(b"0123456789", np.uint8)
    unaligned = np.frombuffer(bytearray(17), np.uint8)[1:].view(np.int64)
    return [base, base[::2], base.reshape(4, 6), np.asfortranarray(base.reshape(4, 6)), ro,
            np.zeros(0, np.int32), np.zeros(3, np.bool_), np.zeros(3, np.int8), np.zeros(2, np.uint64),
            unaligned, 0, -5, 2**63 - 1, 2**63, True, 1.5, np.int32(3), np.uint64(7), np.bool_(True),
            np.float32(1), None, b"abc", (1, 2), (base, 3), (True, np.int32(1))]


def test_the_key_of_a_value_is_the_key_of_numbas_type_for_it():
    """jit.typekey (no numba) and aot.numba_key (numba's typeof) agree on every kind of argument
    a kernel takes: a call finds its exported signature exactly when numba would pick that one."""
    from numba import typeof
    for v in _values():
        assert jit.typekey((v,)) == (aot.numba_key(typeof(v)),), repr(v)
    # a read-only view never takes a writable signature's code, nor a strided array a contiguous one's
    a = np.zeros(8, np.uint8)
    assert jit.typekey((a,)) != jit.typekey((np.frombuffer(bytes(8), np.uint8),))
    assert jit.typekey((a,)) != jit.typekey((a[::2],))
    assert jit.typekey((1,)) != jit.typekey((np.int32(1),)) != jit.typekey((True,))


def _workload(path: str) -> None:
    """A compacted topic over many segments (duplicates, tombstones, headers, batches of many
    records and compressed ones), and a KIP-280 topic whose records win by a header version."""
    import pyarrow as pa

    import compactlog
    rng = np.random.default_rng(5)
    with compactlog.open(path, write=True, create=True) as log:
        log.create_topic("c", 2, {"cleanup.policy": "compact", "segment.bytes": "20000",
                                  "min.cleanable.dirty.ratio": "0.01"})
        log.create_topic("v", 1, {"cleanup.policy": "compact", "segment.bytes": "20000",
                                  "compaction.strategy": "header", "compaction.strategy.header": "ver",
                                  "min.cleanable.dirty.ratio": "0.01"})
        for round_ in range(6):
            ks = rng.integers(0, 150, 300)
            log.send_many("c", [(b"key-%d" % k, None if i % 29 == 0 else b"v%d" % i * int(k % 30 + 1),
                                 [("h", b"x")] if i % 7 == 0 else None) for i, k in enumerate(ks.tolist())])
            log.send_many("v", [(b"key-%d" % (k % 40), b"w%d" % i, [("ver", b"%d" % ((k * 7919 + i) % 1000))])
                                for i, k in enumerate(ks.tolist())])
            codec = ("gzip", "lz4", "zstd", "snappy", "none", "none")[round_]
            log.send_arrow("c", pa.array([b"key-%d" % k for k in ks.tolist()]),
                           pa.array([b"a%d" % i for i in range(len(ks))]), compression=codec)
        log.flush()


def _run(data: str, env_extra: dict, code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("COMPACTLOG_KERNELS", "COMPACTLOG_AOT")}
    env.update(env_extra)
    r = subprocess.run([sys.executable, "-c", code, data], capture_output=True, text=True, env=env,
                       timeout=600, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-3000:]
    return r.stdout


_CLEAN_AND_READ = r"""
import sys, json
from compactlog.cli.main import main
from compactlog.record import jit
jit.PYTHON_BUDGET = 0          # a call the extension cannot take loads numba (none may)
data = sys.argv[1]
assert main(["--data-dir", data, "clean", "--engine", "local", "--force", "--roll", "--now-ms", "%d"]) == 0
assert main(["--data-dir", data, "verify"]) == 0
import compactlog
with compactlog.open(data) as log:
    rows = [(t, p, r.offset, r.key, r.value) for t in sorted(log.topics()) for p in log.partitions(t)
            for r in log.read(t, p)]
print(json.dumps({"rows": len(rows), "digest": hash(tuple(rows)) & 0xffffffff}))
print(json.dumps({"numba": "numba" in sys.modules, "aot": jit.aot_loaded()}))
""" % NOW


@pytest.mark.slow           # two processes, one loading numba (~5 CPU-s)
@needs_build
def test_a_clean_with_the_ahead_of_time_kernels_writes_numbas_bytes(tmp_path):
    """The same workload cleaned, verified and read with the extension (numba never imported)
    and with numba's JIT: every file of both data dirs is the same, byte for byte."""
    src = str(tmp_path / "src")
    _workload(src)
    runs = {}
    for name, env in (("aot", {}), ("jit", {"COMPACTLOG_KERNELS": "jit"})):
        data = str(tmp_path / name)
        shutil.copytree(src, data)
        out = _run(data, {**env, "PYTHONHASHSEED": "0"}, _CLEAN_AND_READ).strip().splitlines()
        runs[name] = (data, json.loads(out[-2]), json.loads(out[-1]))
    assert runs["aot"][2] == {"numba": False, "aot": True}, runs["aot"]
    assert runs["jit"][2] == {"numba": True, "aot": False}, runs["jit"]
    assert runs["aot"][1] == runs["jit"][1] and runs["aot"][1]["rows"] > 0
    a, j = runs["aot"][0], runs["jit"][0]
    files = []
    for dirpath, _, names in os.walk(a):
        for n in names:
            files.append(os.path.relpath(os.path.join(dirpath, n), a))
    assert any(f.endswith(".cleaned") or f.endswith(".log") for f in files)
    _, mismatch, errors = filecmp.cmpfiles(a, j, files, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)
    assert sorted(files) == sorted(os.path.relpath(os.path.join(d, n), j) for d, _, ns in os.walk(j) for n in ns)


_PRODUCE = r"""
import io, sys
from compactlog.cli.main import main
from compactlog.record import jit
jit.PYTHON_BUDGET = 0          # every kernel call past Python: the extension's or numba's
data = sys.argv[1]
assert main(["--data-dir", data, "topics", "create", "--topic", "t", "--partitions", "3"]) == 0
sys.stdin = io.TextIOWrapper(io.BytesIO(b"".join(b"k%d\tv%d\n" % (i % 97, i) for i in range(3000))))
assert main(["--data-dir", data, "produce", "--topic", "t", "--property", "parse.key=true"]) == 0
sys.stdin = io.TextIOWrapper(io.BytesIO(b"".join(b"v%d\n" % i for i in range(3000))))
assert main(["--data-dir", data, "produce", "--topic", "t"]) == 0
print("numba" in sys.modules, jit.aot_loaded())
"""


@needs_build
def test_a_one_shot_produce_runs_its_partitioner_without_numba(tmp_path):
    """The partitioner's kernels (Kafka's murmur2 for keys, the sticky spans for keyless records)
    are in the build: a `produce` of keyed and keyless records never imports numba (~0.7 CPU-s of
    a 200k-record produce). They were declared nogil, which the extension cannot honour, for no
    caller that runs them in threads."""
    out = _run(str(tmp_path / "d"), {}, _PRODUCE).split()[-2:]
    assert out == ["False", "True"], out


_LOADED = r"""
import sys
from compactlog.record import jit, kernels
import numpy as np
h1, h2 = np.zeros(1, np.uint64), np.zeros(1, np.uint64)
kernels.hash_keys(np.frombuffer(bytearray(b"key"), np.uint8), np.zeros(1, np.int64), np.full(1, 3, np.int32), h1, h2)
print(jit.aot_loaded(), "numba" in sys.modules, int(h1[0]))
"""


@pytest.mark.slow           # a copy of the package and two fresh processes each
@needs_build
@pytest.mark.parametrize("changed", [os.path.join("record", "kernels", "hashing.py"), os.path.join("record", "layout.py")])
def test_a_kernel_source_changed_since_the_build_is_left_to_numba(tmp_path, changed):
    """A copy of the package with the build: used as built; once a kernel module's source
    changes, or a module whose constants kernels read, not at all (its code would hold the old
    ones), and the call runs as without a build."""
    root = str(tmp_path / "copy")
    shutil.copytree(os.path.join(ROOT, "compactlog"), os.path.join(root, "compactlog"),
                    ignore=shutil.ignore_patterns("*_test.py", "*.nbi", "*.nbc"))
    env = {"PYTHONPATH": root, "PYTHONDONTWRITEBYTECODE": "1"}

    def probe():
        r = subprocess.run([sys.executable, "-c", _LOADED], capture_output=True, text=True, timeout=600,
                           cwd=root, env={**os.environ, **env, "COMPACTLOG_KERNELS": "auto"})
        assert r.returncode == 0, r.stderr[-2000:]
        return r.stdout.split()

    aot_loaded, numba_loaded, digest = probe()
    assert (aot_loaded, numba_loaded) == ("True", "False")
    with open(os.path.join(root, "compactlog", changed), "a") as f:
        f.write("\n# changed\n")
    aot_loaded, numba_loaded, digest_after = probe()
    assert aot_loaded == "False" and digest_after == digest


@needs_build
def test_the_manifest_names_no_nogil_kernel_and_only_keys_a_call_can_have():
    with open(aot.MANIFEST) as f:
        manifest = json.load(f)
    import importlib
    for name, sigs in manifest["kernels"].items():
        module, qualname = name.split(":")
        kernel = getattr(importlib.import_module(module), qualname)
        assert isinstance(kernel, jit.Kernel) and not kernel.options.get("nogil"), name
        for key, _symbol in sigs:
            assert "Literal" not in json.dumps(key), name
    # the cleaner's kernels are all there (a one-shot clean never imports numba)
    for name in ("compactlog.cleaner.offset_map:_cput_all", "compactlog.cleaner.fast_path:emit_segment",
                 "compactlog.record.kernels.hashing:hash_keys", "compactlog.record.kernels.scan:scan_records",
                 "compactlog.storage.index_check:_walk"):
        assert name in manifest["kernels"], name


@needs_build
def test_a_build_for_another_cpu_is_left_to_numba(monkeypatch):
    """``target_cpu="host"``: the extension may use instructions another CPU lacks (a venv copied
    to an older machine would die of SIGILL), so it is used only on the CPU it was built on."""
    assert jit.host_cpu() is not None
    assert jit._load_aot(), "the build of this machine is used"
    monkeypatch.setattr(jit, "host_cpu", lambda: "0" * 64)
    assert jit._load_aot() == {}
    monkeypatch.setattr(jit, "host_cpu", lambda: None)
    assert jit._load_aot() == {}


@needs_build
def test_a_call_answered_ahead_of_time_does_not_wait_for_numba_loading_elsewhere(monkeypatch):
    """The broker loads numba in a background thread at start (~0.6 s under the build lock); a
    request's kernel call the extension answers must not wait for it (it did: the table was loaded
    under the same lock, and a Kafka-written __consumer_offsets finished loading only after the
    warm-up, behind a ListGroups that came first)."""
    import threading
    import time
    import numpy as np
    from compactlog.record import kernels
    monkeypatch.setattr(jit, "_aot_kernels", None)
    monkeypatch.setattr(jit, "_aot_wanted", True)      # whatever an earlier test of this worker set
    monkeypatch.setattr(kernels.hash_keys, "_aot", None)
    monkeypatch.setattr(kernels.hash_keys, "_dispatcher", None)   # an earlier test may have compiled it
    held, release = threading.Event(), threading.Event()

    def loading_numba():
        with jit._build_lock:
            held.set()
            release.wait(30)
    t = threading.Thread(target=loading_numba, daemon=True)
    t.start()
    try:
        assert held.wait(10)
        h1, h2 = np.zeros(1, np.uint64), np.zeros(1, np.uint64)
        began = time.monotonic()
        kernels.hash_keys(np.frombuffer(bytearray(b"key"), np.uint8), np.zeros(1, np.int64),
                          np.full(1, 3, np.int32), h1, h2)
        assert time.monotonic() - began < 5 and jit.aot_loaded() and h1[0] != 0
    finally:
        release.set()
        t.join(30)
