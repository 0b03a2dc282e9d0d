"""The project's Spark session: local mode by default, tuned for a small machine, one per process.

The JVM and the Python workers it starts die with the process that started them, however it ends
(``watchdog``): the JVM is launched with this process's token in its environment and a watchdog
process ends whatever carries the token once this process is gone.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import uuid

from . import cds, watchdog
from .local_dir import default_local_dir

_session = None
_session_key = None
_watchdog: tuple[subprocess.Popen, str] | None = None


def session(master: str | None = None, *, local_dir: str | None = None, conf: dict | None = None):
    """A SparkSession (created once per process) with the kafka-log data source registered."""
    global _session, _session_key
    master = master or os.environ.get("COMPACTLOG_SPARK_MASTER") or "local[*]"
    key = master
    if _session is not None:
        if _session_key == key and not _session.sparkContext._jsc.sc().isStopped():
            return _session
        _session.stop()
        _session = None
    from .java import require_java
    require_java()
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    local_dir = local_dir or default_local_dir()
    # C1 only starts the JVM ~25% sooner but runs long jobs ~2x slower: for tests, not for work;
    # tests also skip the bytecode verifier on Spark's own jars (a session's start 9.3 -> 7.6 CPU-s),
    # not users: it is a diagnostic option, and the verifier is the JVM's guard against a bad jar
    quick = os.environ.get("COMPACTLOG_SPARK_QUICK_START") == "1"
    java_opts = ("-XX:TieredStopAtLevel=1 -XX:+UnlockDiagnosticVMOptions -XX:-BytecodeVerificationRemote "
                 if quick else "") + "-XX:+UseSerialGC -Dlog4j2.level=error"
    # and the driver maps Spark's classes from a class-data-sharing archive when the tests built one
    # (spark/cds.py: a session's start 8.8 -> 6.9 CPU-s)
    driver_opts = java_opts + (cds.driver_options(local_dir) if quick else "")
    builder = (SparkSession.builder.master(master).appName("compactlog")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(os.cpu_count() or 2))
               .config("spark.default.parallelism", str(os.cpu_count() or 2))
               .config("spark.local.dir", local_dir)
               .config("spark.driver.extraJavaOptions", driver_opts)
               .config("spark.executor.extraJavaOptions", java_opts)
               .config("spark.python.worker.reuse", "true")
               .config("spark.sql.execution.arrow.pyspark.enabled", "true")
               .config("spark.executorEnv.PYSPARK_PYTHON", sys.executable)
               .config("spark.sql.warehouse.dir", os.path.join(local_dir, "warehouse")))
    for k, v in (conf or {}).items():
        builder = builder.config(k, v)
    # only the JVM (and what it starts) inherits the token, not later children of this process
    os.environ[watchdog.OWNER_ENV] = _watch()
    try:
        with _jvm_output(local_dir):
            spark = builder.getOrCreate()
    finally:
        os.environ.pop(watchdog.OWNER_ENV, None)
    spark.sparkContext.setLogLevel("ERROR")
    try:
        from .datasource import register
        register(spark)
    except ImportError:
        pass
    _session, _session_key = spark, key
    return spark


JVM_LOG_ENV = "COMPACTLOG_SPARK_LOG"


@contextlib.contextmanager
def _jvm_output(local_dir: str):
    """The JVM inherits file descriptor 2 when PySpark starts it: pointed at a log file for that
    moment, the JVM's banner and warnings (and its Python workers' stderr) go there for its whole
    life instead of the user's terminal. ``--verbose`` (COMPACTLOG_VERBOSE=1) keeps them on stderr;
    the log's path is in COMPACTLOG_SPARK_LOG."""
    if os.environ.get("COMPACTLOG_VERBOSE") == "1":
        yield
        return
    path = os.path.join(local_dir, f"spark-{os.getpid()}.log")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        os.dup2(fd, 2)
        os.environ[JVM_LOG_ENV] = path
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(fd)


def _watch() -> str:
    """This process's token, its watchdog started on first use."""
    global _watchdog
    if _watchdog is not None and _watchdog[0].poll() is None:
        return _watchdog[1]
    token = uuid.uuid4().hex
    env = {k: v for k, v in os.environ.items() if k != watchdog.OWNER_ENV}
    try:
        # -S -I: no site packages, no PYTHON* variables: it imports nothing but the standard library
        proc = subprocess.Popen([sys.executable, "-S", "-I", watchdog.__file__, token], stdin=subprocess.PIPE,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    except OSError:
        return token        # no watchdog: PySpark's own stdin check is all there is
    _watchdog = (proc, token)
    return token


def stop() -> None:
    global _session
    if _session is not None:
        _session.stop()
        _session = None
