"""The cleaner on a Spark cluster writes the same files as in one process.

``local-cluster[1,2,1024]`` starts a real standalone master and a worker whose executor is a
separate JVM (two task slots) with Python workers of its own: plans are pickled to it, its tasks
clean their partitions in place on the shared disk, results travel back. One executor proves the
process boundary as two would: a second executor JVM cost ~8 CPU-s and showed nothing the first
does not (the tasks of one executor already run side by side, in Python workers of their own). One copy of a data dir is cleaned
that way by ``compactlog clean --spark-master`` (its own process), another copy in this process
with ``InProcessExecutor``; every segment and index file and the cleaner checkpoint must be
byte-identical.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np

from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.executor import InProcessExecutor
from compactlog.storage import files
from compactlog.storage.datadir import DataDir
from compactlog.storage.partitioner import partition_for_key

TOPIC = "accounts"
PARTITIONS = 4
T0 = 1_700_000_000_000
NOW = T0 + 10 * 86_400_000
EXE = os.path.join(os.path.dirname(sys.executable), "compactlog")
COMPARED = (".log", ".index", ".timeindex", ".txnindex")


def build(root: str) -> None:
    rng = np.random.default_rng(7)
    t = [T0]
    with DataDir(root, clock=lambda: t[0], create=True, writable=True) as dd:
        dd.create_topic(TOPIC, PARTITIONS, {"cleanup.policy": "compact", "segment.bytes": str(128 << 10),
                                            "min.cleanable.dirty.ratio": "0.01", "index.interval.bytes": "1024"})
        dd.create_topic("audit", 1, {"cleanup.policy": "compact", "segment.bytes": str(64 << 10)})
        logs = [dd.open_log(TOPIC, p) for p in range(PARTITIONS)]
        keys = [f"acct-{i:05d}".encode() for i in range(2000)]
        by_part = [[k for k in keys if partition_for_key(k, PARTITIONS) == p] for p in range(PARTITIONS)]
        for rnd in range(40):
            for p, log in enumerate(logs):
                ks = [by_part[p][i] for i in rng.integers(0, len(by_part[p]), 60)]
                vals = [None if rng.random() < 0.03 else bytes(rng.integers(97, 123, 40, dtype=np.uint8))
                        for _ in ks]
                t[0] += 1000
                log.append_records(ks, vals, compression="gzip" if rnd % 7 == 3 else "none")
        # transactions in partition 1: an aborted one, a committed one (markers, .txnindex)
        for pid, commit in ((21, False), (22, True)):
            ks = by_part[1][:20]
            logs[1].append_records(ks, [b"txn-%d" % pid] * len(ks), producer_id=pid, producer_epoch=0,
                                   base_sequence=0, transactional=True)
            logs[1].append_control(commit=commit, producer_id=pid, producer_epoch=0)
        for log in logs:
            log.roll()
            log.append_records([by_part[log.partition][0]], [b"tail"])
        audit = dd.open_log("audit", 0)
        for i in range(30):
            audit.append_records([b"a%d" % (i % 5)], [b"x" * 3000])


def files_of(root: str) -> dict:
    """Every .log/.index/.timeindex/.txnindex file of the partition dirs, by relative path."""
    out = {}
    for name in sorted(os.listdir(root)):
        pdir = os.path.join(root, name)
        if os.path.isdir(pdir) and files.is_partition_dir(name):
            for f in sorted(os.listdir(pdir)):
                if f.endswith(COMPARED):
                    with open(os.path.join(pdir, f), "rb") as fh:
                        out[f"{name}/{f}"] = fh.read()
    return out


def test_local_cluster_clean_equals_in_process_clean(tmp_path):
    src = str(tmp_path / "src")
    build(src)
    a, b = str(tmp_path / "cluster"), str(tmp_path / "local")
    shutil.copytree(src, a)          # copy2: the segments' mtimes (used by the cleaner) are kept
    shutil.copytree(src, b)
    before = files_of(src)

    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    env.pop("COMPACTLOG_SPARK_MASTER", None)
    p = subprocess.run([EXE, "--data-dir", a, "clean", "--spark-master", "local-cluster[1,2,1024]",
                        "--now-ms", str(NOW), "--json"], capture_output=True, text=True, env=env, timeout=600)
    assert p.returncode == 0, p.stderr[-4000:]
    cluster = [json.loads(line) for line in p.stdout.splitlines() if line.startswith("{")]

    with DataDir(b, clock=lambda: NOW, writable=True) as dd:
        local = [o.to_dict() for o in Cleaner(dd, InProcessExecutor()).run(NOW)]

    names = {f"{TOPIC}-{i}" for i in range(PARTITIONS)} | {"audit-0"}
    assert {f"{o['topic']}-{o['partition']}" for o in cluster} == names
    assert all(o["cleaned"] and o["error"] is None for o in cluster), cluster
    assert all(o["engine"] == "spark" for o in cluster)          # ran as Spark tasks
    assert all(o["messagesRead"] > o["messagesWritten"] > 0 for o in cluster)
    keys = ("topic", "partition", "cleaned", "firstDirtyOffset", "firstUncleanableOffset", "endOffset",
            "messagesRead", "messagesWritten", "bytesRead", "bytesWritten", "removed", "startSize", "endSize")
    assert [{k: o[k] for k in keys} for o in cluster] == [{k: o[k] for k in keys} for o in local]

    got, want = files_of(a), files_of(b)
    assert got.keys() == want.keys()
    assert [n for n in got if got[n] != want[n]] == []
    assert got != before                                        # the clean did rewrite segments
    assert any(n.endswith(".txnindex") for n in got)
    with open(os.path.join(a, "cleaner-offset-checkpoint"), "rb") as fa, \
            open(os.path.join(b, "cleaner-offset-checkpoint"), "rb") as fb:
        ca, cb = fa.read(), fb.read()
    assert ca == cb and len(ca.splitlines()) == 2 + len(names)
