"""A class-data-sharing archive of the Spark driver's classes, for the tests' many short JVMs.

A SparkSession's JVM loads ~15,000 classes from Spark's jars as it starts and runs its first
jobs, reading, parsing and linking each one. A dynamic CDS archive (JDK 13+, JEP 350), written
once by a JVM that started a session and ran a few small jobs, holds those classes parsed and
linked; a later JVM given ``-XX:SharedArchiveFile`` maps them instead. The JVM checks the archive
against its own version and class path and ignores one that does not match (``-Xshare:auto``, the
default), so a stale archive costs nothing but the saving.

For tests only (``COMPACTLOG_SPARK_QUICK_START=1``, with the session's other start-up options):
the archive is ~170 MB and costs ~46 CPU-s to write, and a user's command starts one JVM; a test
run starts many (the workers' sessions, every command a test runs with Spark in a subprocess),
each ~3 CPU-s cheaper with it. The tests' ``spark`` fixture builds it in the background when it is
missing (``build_in_background``: ``python -m compactlog.spark.cds_build``; another jar set,
``make clean-build``) and the JVMs started before it is done go without; not in a tree's first
``make test`` (a fresh clone, CI), which sets ``COMPACTLOG_SPARK_CDS=0``: its sessions start before
the archive is written and the few JVMs after them win back less than a third of its cost; not ``make venv``,
whose fresh-clone run would wait ~1-2 min for what that one run wins back. Kept in the Spark local dir (``build/spark-local`` under ``make``), named by
the JDK and Spark's jar set; one build at a time (a lock), a failed one not tried again until its
``.failed`` note is removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import glob
import hashlib
import os
import subprocess
import sys
import time

DUMP_ENV = "COMPACTLOG_SPARK_CDS_DUMP"     # set in the building process: where its JVM writes the archive
SWITCH_ENV = "COMPACTLOG_SPARK_CDS"        # "0": no archive, neither built nor used


def _spark_jars() -> str:
    home = os.environ.get("SPARK_HOME")
    if not home:
        import pyspark
        home = os.path.dirname(pyspark.__file__)
    return os.path.join(home, "jars")


def archive_path(local_dir: str) -> str | None:
    """The archive for this JDK and this Spark (its jars' names, sizes and times), or None when
    either cannot be found."""
    from .java import java_executable
    java = java_executable()
    jars = _spark_jars()
    try:
        java = os.path.realpath(java) if java else None
        if java is None:
            return None
        h = hashlib.sha256()
        for path in [java, os.path.join(os.path.dirname(os.path.dirname(java)), "lib", "modules")]:
            st = os.stat(path) if os.path.exists(path) else None
            h.update(f"{path}:{st and st.st_size}:{st and st.st_mtime_ns}\n".encode())
        with os.scandir(jars) as entries:
            for e in sorted(entries, key=lambda e: e.name):
                st = e.stat()
                h.update(f"{e.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    except OSError:
        return None
    return os.path.join(local_dir, "cds", f"spark-{h.hexdigest()[:16]}.jsa")


def driver_options(local_dir: str) -> str:
    """The driver JVM's CDS options: write the archive (the building process), map it (when it
    exists), or none."""
    dump = os.environ.get(DUMP_ENV)
    if dump:
        return f" -XX:ArchiveClassesAtExit={dump} -Xlog:cds=off -Xlog:cds+dynamic=off"
    if os.environ.get(SWITCH_ENV) == "0":
        return ""
    path = archive_path(local_dir)
    if path is None or not os.path.exists(path):
        return ""
    # -Xlog: a JVM that finds the archive does not match its class path says so on stderr
    return f" -XX:SharedArchiveFile={path} -Xlog:cds=off -Xlog:cds+dynamic=off"


def _wanted(local_dir: str) -> str | None:
    """The archive's path when it is missing and may be built."""
    if os.environ.get(SWITCH_ENV) == "0" or os.environ.get(DUMP_ENV):
        return None
    path = archive_path(local_dir)
    if path is None or os.path.exists(path) or os.path.exists(path + ".failed"):
        return None
    return path


_started: list = []


def build_in_background(local_dir: str) -> None:
    """Start building the archive in a process of its own unless it exists (once per process)."""
    if _started or _wanted(local_dir) is None:
        return
    _started.append(True)
    env = dict(os.environ, COMPACTLOG_SPARK_LOCAL_DIR=local_dir)
    with contextlib.suppress(OSError):
        subprocess.Popen([sys.executable, "-m", "compactlog.spark.cds_build"], env=env, stdin=subprocess.DEVNULL,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def ensure(local_dir: str, timeout: float = 600) -> str | None:
    """Build the archive unless it exists or another process is building it; its path, or None."""
    path = _wanted(local_dir)
    if path is None:
        path = archive_path(local_dir)
        return path if path is not None and os.path.exists(path) else None
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path + ".lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None             # another process is building it
        if os.path.exists(path):
            return path
        tmp = f"{path}.{os.getpid()}.tmp"
        env = dict(os.environ, **{DUMP_ENV: tmp})
        began = time.monotonic()
        try:
            run = subprocess.run([sys.executable, "-m", "compactlog.spark.cds_build"], env=env, timeout=timeout,
                                 stdin=subprocess.DEVNULL, capture_output=True, text=True)
            failed = None if run.returncode == 0 and os.path.getsize(tmp) > 0 else \
                f"exit {run.returncode}: {run.stderr[-2000:]}"
        except (OSError, subprocess.TimeoutExpired) as e:
            failed = f"{type(e).__name__}: {e}"
        if failed:
            # not tried again by every session of every run: remove the file to try again
            with open(path + ".failed", "w") as f:
                f.write(f"building {path} failed after {time.monotonic() - began:.0f} s: {failed}\n")
            _remove(tmp)
            return None
        os.replace(tmp, path)
        for old in glob.glob(os.path.join(os.path.dirname(path), "spark-*.jsa*")):
            if not old.startswith(path):
                _remove(old)            # another jar set's (170 MB each)
        return path


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
