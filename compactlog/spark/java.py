"""Is there a Java that Spark can start? Asked before any JVM is launched.

PySpark launches the JVM through Spark's ``spark-class``, which runs ``$JAVA_HOME/bin/java`` when
JAVA_HOME is set and ``java`` from PATH otherwise; without one, PySpark fails seconds later with
JAVA_GATEWAY_EXITED, which says nothing about Java. Spark 4 needs Java 17 or later. The answer
is looked up once per process (``java -version`` takes ~0.1 s).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess

from ..errors import ConfigError

MIN_VERSION = 17
MISSING = (f"Java {MIN_VERSION}+ not found (JAVA_HOME or java on PATH): the Spark engine needs it; "
           f"use --engine local")

_VERSION = re.compile(r'version "(\d+)(?:\.(\d+))?')
_answer: list = []        # [problem or None], once looked up


def java_executable() -> str | None:
    """The java Spark would run: ``$JAVA_HOME/bin/java`` when JAVA_HOME is set (spark-class does
    not look further then), else ``java`` on PATH; None when there is none."""
    home = os.environ.get("JAVA_HOME")
    if home:
        exe = os.path.join(home, "bin", "java")
        return exe if os.path.isfile(exe) and os.access(exe, os.X_OK) else None
    return shutil.which("java")


def major_version(version_output: str) -> int | None:
    """The feature release in ``java -version``'s text: 17 for "17.0.15", 8 for "1.8.0_202"."""
    m = _VERSION.search(version_output)
    if m is None:
        return None
    major = int(m.group(1))
    return int(m.group(2) or 0) if major == 1 else major


def java_problem() -> str | None:
    """Why Spark cannot start here (one line), or None when a Java 17+ is found."""
    if not _answer:
        _answer.append(_look_up())
    return _answer[0]


def _look_up() -> str | None:
    exe = java_executable()
    if exe is None:
        return MISSING
    try:
        run = subprocess.run([exe, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return MISSING
    if run.returncode != 0:
        return MISSING
    major = major_version(run.stderr + run.stdout)
    if major is not None and major < MIN_VERSION:
        return MISSING.replace("(JAVA_HOME or java on PATH)",
                               f"(JAVA_HOME or java on PATH; {exe} is Java {major})")
    return None     # a version this cannot read is left to Spark to judge


def require_java() -> None:
    """Raise the one-line error before anything starts a JVM."""
    problem = java_problem()
    if problem is not None:
        raise ConfigError(problem)


def forget() -> None:
    """Look again on the next question (tests that change PATH or JAVA_HOME)."""
    _answer.clear()
