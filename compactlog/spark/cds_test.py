"""The tests' class-data-sharing archive: keyed by the JDK and the jar set, mapped by the driver."""

from __future__ import annotations

import os

import pytest

from compactlog.spark import cds


@pytest.fixture
def spark_home(tmp_path, monkeypatch):
    jars = tmp_path / "spark" / "jars"
    jars.mkdir(parents=True)
    (jars / "spark-core.jar").write_bytes(b"x" * 10)
    monkeypatch.setenv("SPARK_HOME", str(tmp_path / "spark"))
    monkeypatch.delenv(cds.DUMP_ENV, raising=False)
    monkeypatch.delenv(cds.SWITCH_ENV, raising=False)
    return jars


def test_the_archive_is_named_by_the_jar_set(spark_home, tmp_path):
    local = str(tmp_path / "local")
    first = cds.archive_path(local)
    assert first is not None and first.startswith(os.path.join(local, "cds", "spark-")) and first.endswith(".jsa")
    assert cds.archive_path(local) == first
    (spark_home / "delta.jar").write_bytes(b"y")
    assert cds.archive_path(local) != first             # another Spark: another archive


def test_no_java_no_archive(spark_home, tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-jdk"))
    assert cds.archive_path(str(tmp_path)) is None
    assert cds.driver_options(str(tmp_path)) == "" and cds.ensure(str(tmp_path)) is None


def test_driver_options_map_the_archive_only_once_it_is_there(spark_home, tmp_path, monkeypatch):
    local = str(tmp_path / "local")
    path = cds.archive_path(local)
    assert cds.driver_options(local) == ""
    os.makedirs(os.path.dirname(path))
    open(path, "wb").close()
    assert f"-XX:SharedArchiveFile={path}" in cds.driver_options(local)
    monkeypatch.setenv(cds.SWITCH_ENV, "0")
    assert cds.driver_options(local) == ""
    monkeypatch.setenv(cds.DUMP_ENV, "/x/new.jsa")       # the building process writes it
    assert "-XX:ArchiveClassesAtExit=/x/new.jsa" in cds.driver_options(local)


def test_a_failed_build_is_not_tried_again(spark_home, tmp_path, monkeypatch):
    local = str(tmp_path / "local")
    path = cds.archive_path(local)
    os.makedirs(os.path.dirname(path))
    with open(path + ".failed", "w") as f:
        f.write("building failed\n")
    monkeypatch.setattr(cds.subprocess, "run", lambda *a, **k: pytest.fail("built again"))
    monkeypatch.setattr(cds.subprocess, "Popen", lambda *a, **k: pytest.fail("built again"))
    assert cds.ensure(local) is None
    cds.build_in_background(local)


@pytest.mark.spark
def test_the_tests_driver_maps_the_archive():
    """With the archive built (by an earlier test run), a test session's JVM has it mapped: Spark's classes
    come from it, not from parsing the jars again."""
    from compactlog.spark.local_dir import default_local_dir
    from compactlog.spark.session import session
    if os.environ.get("COMPACTLOG_SPARK_QUICK_START") != "1":
        pytest.skip("the archive is for the tests' quick-start JVMs (COMPACTLOG_SPARK_QUICK_START=1)")
    path = cds.archive_path(default_local_dir())
    spark = session("local[2]")
    if path is None or not os.path.exists(path):
        pytest.skip(f"no archive built yet ({path}): a tree's second make test writes it in the background")
    jvm = spark.sparkContext._jvm
    args = list(jvm.java.lang.management.ManagementFactory.getRuntimeMXBean().getInputArguments())
    if f"-XX:SharedArchiveFile={path}" not in args:
        pytest.skip("this session was started before the archive was built")
    with open(f"/proc/{jvm.java.lang.ProcessHandle.current().pid()}/maps") as f:
        assert path in f.read(), "the JVM was given the archive but did not map it"
