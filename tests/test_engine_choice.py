"""Where ``clean`` and ``snapshot`` run: the cost model (compactlog/cleaner/executor.py), fitted to
benchmarks/engine_crossover.py, and what the commands report about it.

Small rounds and snapshots stay in the command's process (a local Spark's JVM alone costs more
than the work); Spark is chosen for a Spark master, for a key map only Spark can build, or when
the model predicts it finishes sooner (large work over many partitions, a session already up).
``clean --json`` and the cleaner's run log say which engine ran and why; so does ``snapshot``.
No Spark runs here.
"""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

from compactlog.cleaner.executor import MODEL, CostModel, InProcessExecutor
from compactlog.spark.executor import AutoExecutor, SparkExecutor, make_executor
from compactlog.cli.snapshot import choose_engine
from compactlog.storage.datadir import DataDir

NOW = 1_900_000_000_000
MB = 1_000_000


def test_the_reported_cases_stay_in_this_process():
    # the cases: clean of 119 MB (1.9 s in-process, 18.2 s on Spark); a 54-record snapshot
    c = MODEL.choose("clean", [119 * MB], warm=False, what="to rewrite")
    assert c.engine == "in-process" and c.local_s < 1 < 5 < c.spark_s
    assert c.reason.startswith("119.0 MB to rewrite in 1 partition(s): ~")
    assert "in this process vs ~" in c.reason and "on a local Spark (JVM start included)" in c.reason
    s = MODEL.choose("snapshot", [6000], warm=False, what="of log to read")
    assert s.engine == "in-process"


def test_spark_when_it_finishes_sooner():
    many_cores = CostModel(cores=16)
    # many large partitions on many cores pay for the JVM...
    big = many_cores.choose("clean", [2000 * MB] * 16, warm=False, what="to rewrite")
    assert big.engine == "spark" and big.spark_s < big.local_s
    assert "16 task(s) at once" in big.reason
    # ...one partition never does (one task does what this process does, after the JVM start)
    assert many_cores.choose("clean", [50_000 * MB], warm=False, what="to rewrite").engine == "in-process"
    # a running session costs little: moderate rounds over several partitions go there
    assert many_cores.choose("clean", [300 * MB] * 8, warm=True, what="to rewrite").engine == "spark"
    assert many_cores.choose("clean", [300 * MB] * 8, warm=False, what="to rewrite").engine == "in-process"
    # on this project's 2-core reference machine a cold Spark pays off only at gigabytes
    two = CostModel(cores=2)
    assert two.choose("clean", [500 * MB] * 4, warm=False, what="to rewrite").engine == "in-process"
    assert two.choose("clean", [10_000 * MB] * 4, warm=False, what="to rewrite").engine == "spark"


def plan(topic: str, partition: int, size: int, map_kind: str = "task"):
    seg = SimpleNamespace(base_offset=0, log_bytes=size)
    return SimpleNamespace(topic=topic, partition=partition, segments=[seg], first_uncleanable=10, map_kind=map_kind,
                           extra={})


def test_auto_executor_choices():
    auto = AutoExecutor()
    assert auto.choose([plan("t", 0, 10 * MB)]).engine == "in-process"
    c = auto.choose([plan("t", 0, 10 * MB), plan("t", 1, 10 * MB, "distributed")])
    assert c.engine == "spark" and "the key map of t-1 does not fit one task's memory" in c.reason
    ex = make_executor("auto", "spark://host:7077")
    assert isinstance(ex, SparkExecutor) and ex.choice.reason == "a Spark master was given (spark://host:7077)"
    assert make_executor("spark").choice.reason == "--engine spark"
    local = make_executor("local")
    assert isinstance(local, InProcessExecutor) and local.last_choice == "in-process (--engine local)"


def test_snapshot_engine_choice():
    assert choose_engine("auto", None, [6000, 5000]).engine == "in-process"
    assert choose_engine("auto", "local[4]", [6000]).reason == "a Spark master was given (local[4])"
    assert choose_engine("local", None, [10**15]).engine == "in-process"
    huge = choose_engine("auto", None, [10**15])
    assert huge.engine == "spark" and "would not fit in half of this machine's available memory" in huge.reason


def test_clean_reports_the_engine_in_json_and_the_run_log(cli, tmp_path):
    root = str(tmp_path / "data")
    with DataDir(root, clock=lambda: NOW - 10_000, create=True, writable=True) as dd:
        dd.create_topic("c", 2, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01",
                                 "segment.bytes": "2000"})
        for p in (0, 1):
            log = dd.open_log("c", p)
            for i in range(200):
                log.append_records([b"k%d" % (i % 5)], [b"v" * 30])
    r = cli("--data-dir", root, "clean", "--now-ms", NOW, "--json")
    assert r.code == 0, r.err
    outs = [json.loads(line) for line in r.out.splitlines()]
    cleaned = [o for o in outs if o["engine"] is not None]
    assert len(cleaned) == 2
    for o in cleaned:
        assert o["engine"] == "in-process"
        assert o["engineReason"].startswith("0.0 MB to rewrite in 2 partition(s): ~0.0 s in this process vs ~")
    with open(os.path.join(root + ".logs", "log-cleaner.log")) as f:
        log = f.read()
    assert "Engine: in-process (0.0 MB to rewrite in 2 partition(s)" in log
    with DataDir(root, clock=lambda: NOW - 5_000, writable=True) as dd:
        for i in range(200):
            dd.open_log("c", 0).append_records([b"k%d" % (i % 5)], [b"w" * 30])
    r = cli("--data-dir", root, "clean", "--now-ms", NOW, "--json", "--force", "--engine", "local")
    assert r.code == 0, r.err
    outs = [json.loads(line) for line in r.out.splitlines()]
    assert {(o["engine"], o["engineReason"]) for o in outs if o["engine"]} == {("in-process", "--engine local")}


def test_missing_java_is_one_line_before_anything_runs(tmp_path):
    """``--engine spark`` (and ``cleaner run``, Spark by default) without a Java: one line and exit 1
    before the data dir is touched, not PySpark's JAVA_GATEWAY_EXITED as an internal error (70)."""
    import shutil
    import subprocess
    import sys
    root = str(tmp_path / "data")
    shutil.copytree(os.path.join(os.path.dirname(__file__), "data", "kafka-vectors",
                                 "mscaldas2012+kafka-connect-spooldir", "kafka-data"), root)
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    env["PATH"] = str(empty)
    line = "error: Java 17+ not found (JAVA_HOME or java on PATH): the Spark engine needs it; use --engine local"
    for args in (["clean", "--engine", "spark", "--force", "--topic", "docker-connect-configs"],
                 ["cleaner", "run", "--iterations", "1"],
                 ["snapshot", "--topic", "docker-connect-configs", "--out", str(tmp_path / "out"),
                  "--engine", "spark"]):
        before = sorted(os.listdir(root))
        p = subprocess.run([sys.executable, "-m", "compactlog", "--data-dir", root, *args], env=env,
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 1, (args, p.stderr)
        assert p.stderr.strip() == line, (args, p.stderr)
        assert sorted(os.listdir(root)) == before
    env["JAVA_HOME"] = str(tmp_path / "no-jdk")       # set, but holding no java: same line
    p = subprocess.run([sys.executable, "-m", "compactlog", "--data-dir", root, "clean", "--engine", "spark"],
                       env=env, capture_output=True, text=True, timeout=120)
    assert (p.returncode, p.stderr.strip()) == (1, line)
