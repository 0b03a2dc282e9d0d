"""Finding the Java that Spark would start, before any JVM is launched."""

from __future__ import annotations

import os

import pytest

from compactlog.cleaner.executor import EngineChoice
from compactlog.errors import ConfigError
from compactlog.spark import java
from compactlog.spark.executor import make_executor, without_java


@pytest.fixture(autouse=True)
def fresh_answer():
    java.forget()
    yield
    java.forget()


def fake_java(tmp_path, version_line: str, code: int = 0) -> str:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    exe = home / "bin" / "java"
    exe.write_text(f"#!/bin/sh\necho '{version_line}' >&2\nexit {code}\n")
    exe.chmod(0o755)
    return str(home)


def test_major_version_of_old_and_new_version_strings():
    assert java.major_version('openjdk version "17.0.15" 2025-04-15') == 17
    assert java.major_version('java version "1.8.0_202"') == 8
    assert java.major_version('openjdk version "21" 2023-09-19') == 21
    assert java.major_version("no version here") is None


def test_no_java_anywhere_is_the_one_line(tmp_path, monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert java.java_problem() == java.MISSING
    with pytest.raises(ConfigError, match="^Java 17\\+ not found \\(JAVA_HOME or java on PATH\\): the Spark "
                                          "engine needs it; use --engine local$"):
        make_executor("spark")
    # an automatic choice stays in this process instead (when no Spark runs in this process already,
    # as one may in a test worker that ran Spark tests before)
    monkeypatch.setattr("compactlog.cleaner.engines.spark_running", lambda: False)
    chosen = without_java(EngineChoice("spark", "big"))
    assert chosen.engine == "in-process" and "no Java 17+" in chosen.reason


def test_java_home_is_the_only_place_looked_when_set(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    assert java.java_executable() is None
    assert java.java_problem() == java.MISSING


def test_an_old_java_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", fake_java(tmp_path, 'openjdk version "11.0.2" 2019-01-15'))
    problem = java.java_problem()
    assert problem.startswith("Java 17+ not found (JAVA_HOME or java on PATH; ")
    assert "is Java 11)" in problem and problem.endswith("use --engine local")


def test_a_java_17_is_accepted(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", fake_java(tmp_path, 'openjdk version "17.0.15" 2025-04-15'))
    assert java.java_executable() == os.path.join(os.environ["JAVA_HOME"], "bin", "java")
    assert java.java_problem() is None
    assert make_executor("spark").name == "spark"


def test_a_java_that_fails_to_run_is_missing(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", fake_java(tmp_path, "Error: broken", code=1))
    assert java.java_problem() == java.MISSING
