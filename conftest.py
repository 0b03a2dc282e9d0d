"""Test lanes: every test is marked by what it needs, so `make test-fast` runs in seconds while
working and `make test` (CI) runs everything.

Markers, set here at collection from what a test uses (so a new test is classified without anyone
remembering to mark it):
- ``spark``: a SparkSession (the ``spark`` fixture, or a test parametrized on the Spark engine);
- ``broker``: a ``compactlog serve`` subprocess (modules that start one);
- ``corpus``: Kafka's cleaner corpus (the ``corpus_dir`` fixture, the corpus modules);
- ``slow``: other tests that take seconds each (kill -9 trials, subprocess CLIs, fuzz rounds).
The fast lane is ``-m "not spark and not broker and not corpus and not slow"``.
"""

from __future__ import annotations

import pytest

# every owner's settings registered (storage/config_registry.py), as the CLI and the broker have
# them, whichever test module imports what first
import compactlog.settings  # noqa: F401,E402

LANE_MARKERS = {
    "spark": "needs a SparkSession (a JVM): slow to start",
    "broker": "starts a compactlog serve subprocess",
    "corpus": "runs over Kafka's cleaner corpus",
    "slow": "takes seconds: kill -9 trials, subprocess CLIs, fuzz rounds",
}

# modules whose tests start a broker subprocess (module-scoped Broker fixtures)
BROKER_MODULES = {
    "test_broker_admin", "test_broker_clients", "test_broker_compaction", "test_broker_fuzz",
    "test_broker_lifecycle", "test_broker_transactions", "test_cli_tools", "test_groups_cli",
    "test_groups_cli_more", "test_groups_clients", "test_groups_restart", "test_demo",
    "test_transactions_cli", "test_readme_transactions", "test_readme", "test_cli_console_broker",
    "test_txn_quix", "test_txn_faust", "test_readers_beside_a_broker",
}
SPARK_MODULES = {"test_spark_datasource", "test_spark_sink", "test_spark_streaming", "test_cluster",
                 "test_snapshot", "test_engine_choice", "test_readme"}
CORPUS_MODULES = {"test_corpus", "test_corpus_cli", "test_read_only", "test_kcompare_dump"}
# modules made of subprocesses, kill -9 trials or long randomized rounds (and, for the rest, a test
# taking a second or more of CPU is marked ``@pytest.mark.slow`` where it is written: the fast lane
# stays under a minute)
SLOW_MODULES = {
    "test_data_dir_lock", "test_kill_during_append", "test_cli_consume_follow", "test_cli_startup",
    "test_crash_clean", "test_clean_errors", "test_decompression_bomb", "test_index_check_flips",
    "test_txn_index_trust", "test_recovery_beats_kafka", "test_never_delete_by_guess",
    "test_cli_produce_consume", "test_verify", "watchdog_test", "test_clean_progress_tty",
    # numba against Python on every kernel call of real paths, and fresh processes (12 s of CPU)
    "jit_test",
    # the decoder's hypothesis fuzzing (4 s), the cross-check against kafka-python's codec (4 s);
    # batch_test's properties and kafka_vectors_test stay in the fast lane
    "batch_fuzz_test", "batch_kafka_python_test",
    # every flipped byte of segments and indexes through the cleaner (65 tests, 14 s)
    "test_corruption_cleaner",
    # appends, cleans and reads racing on threads
    "test_partition_concurrency",
}


def pytest_configure(config):
    for name, what in LANE_MARKERS.items():
        config.addinivalue_line("markers", f"{name}: {what}")
    # the controller of `pytest -n N --dist loadfile`: where its workers say which files need Spark
    # (tests/lane_scheduling.py); the workers, started after this, inherit the variable
    if (not hasattr(config, "workerinput") and config.pluginmanager.hasplugin("xdist")
            and config.getoption("dist", "no") == "loadfile" and config.getoption("numprocesses", None)):
        import os
        import tempfile
        _lanes["dir"] = tempfile.mkdtemp(prefix="compactlog-lanes-")
        os.environ[LANES_FILE_ENV] = os.path.join(_lanes["dir"], "spark-files")


def pytest_unconfigure(config):
    if _lanes.get("dir"):
        import os
        import shutil
        shutil.rmtree(_lanes.pop("dir"), ignore_errors=True)
        os.environ.pop(LANES_FILE_ENV, None)


_lanes: dict = {}
LANES_FILE_ENV = "COMPACTLOG_TEST_LANES_FILE"       # tests/lane_scheduling.py's


def _lane_scheduling():
    import os
    import sys
    tests = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import lane_scheduling
    return lane_scheduling


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    """loadfile, with the Spark files on two of the workers (one SparkSession started per worker
    that runs them: tests/lane_scheduling.py)."""
    if not _lanes.get("dir"):
        return None
    return _lane_scheduling().SparkConfinedScheduling(config, log, lanes_file=__import__("os").environ[LANES_FILE_ENV])


# a module that imports one of these starts a broker subprocess
BROKER_HELPERS = ("broker_support", "apps_support", "txn_tools_support", "txn_support", "test_txn_conformance_crash")


def _starts_a_broker(module) -> bool:
    source = getattr(module, "__file__", None)
    if not source:
        return False
    cached = _SOURCE_CACHE.get(source)
    if cached is None:
        try:
            with open(source, encoding="utf-8") as f:
                text = f.read()
        except OSError:
            text = ""
        cached = _SOURCE_CACHE[source] = any(h in text for h in BROKER_HELPERS)
    return cached


_SOURCE_CACHE: dict[str, bool] = {}


def lanes_of(item) -> set[str]:
    module = item.module.__name__.rsplit(".", 1)[-1] if getattr(item, "module", None) else ""
    fixtures = set(getattr(item, "fixturenames", ()))
    lanes = set()
    if "spark" in fixtures or module in SPARK_MODULES or "[spark" in item.name or "on_spark" in item.name:
        lanes.add("spark")
    if module in BROKER_MODULES or _starts_a_broker(getattr(item, "module", None)):
        lanes.add("broker")
    if "corpus_dir" in fixtures or module in CORPUS_MODULES:
        lanes.add("corpus")
    if module in SLOW_MODULES:
        lanes.add("slow")
    return lanes


# the longest modules (wall seconds of one worker each, >= 15 s, longest first), scheduled first:
# pytest-xdist's --dist loadfile hands out modules in collection order, and a long module collected
# last leaves the other workers idle while it runs alone (a stale list only changes the order, never
# what runs). From a whole quiet clean-clone run with COMPACTLOG_TEST_CPU_LOG (8bb4fff), the walls
# of the modules changed since estimated (test_bucket_data_dir's Spark tests now test_bucket_spark)
LONGEST_MODULES = [
    "test_corpus", "test_readme", "test_bucket_data_dir", "test_fault_campaign", "test_offline_tiered_clean",
    "test_bucket_spark", "test_spark_cluster", "test_tiered_compaction_broker", "test_scale",
    "test_tiered_broker", "test_apps_multi_quix", "test_txn_quix", "test_compaction_strategies", "test_txn_faust",
    "test_spark_datasource", "test_txn_restart_timeouts", "test_security_clients", "test_clean_errors",
    "test_remote_compaction_corpus", "test_spark_streaming", "test_corruption_cleaner",
    "test_groups_consumer_protocol", "test_groups_cooperative_static", "test_readme_transactions", "test_metrics",
    "test_readers_beside_a_broker", "test_cluster", "test_remote_observability", "test_txn_conformance_eos",
    "compaction_test", "jit_test", "test_cli_console_broker", "test_demo", "test_txn_coordinator",
    "test_groups_restart", "test_decompression_bomb", "test_groups_clients", "test_crash_clean",
    "test_security_sasl_wire", "test_txn_conformance_basic", "test_remote_store", "test_corpus_cli",
    "test_transactions_cli", "test_internal_topics_crash", "test_txn_conformance_crash", "reader_test",
    "test_warmup", "test_broker_storage_errors", "test_broker_clients", "test_txn_conformance_crash_marker",
    "test_spark_sink", "test_snapshot", "test_broker_lifecycle", "test_groups_cli_more",
    "test_index_check_flips",
]


def _schedule_rank(item) -> int:
    module = item.path.stem
    return LONGEST_MODULES.index(module) if module in LONGEST_MODULES else len(LONGEST_MODULES)


def pytest_collection_modifyitems(config, items):
    for item in items:
        for lane in lanes_of(item):
            item.add_marker(getattr(pytest.mark, lane))
    items.sort(key=_schedule_rank)          # stable: a module's own order is kept
    import os
    lanes_file = os.environ.get(LANES_FILE_ENV)
    worker = getattr(config, "workerinput", {}).get("workerid")
    if lanes_file and worker:
        # the files xdist's loadfile groups by (a test id's part before the first "::")
        spark = {item.nodeid.split("::", 1)[0] for item in items if item.get_closest_marker("spark")}
        _lane_scheduling().write_worker_lanes(lanes_file, worker, spark)


# COMPACTLOG_TEST_CPU_LOG=FILE: one JSON line per module with its wall seconds and the CPU seconds
# of the worker and every process it started (reaped children, and descendants still alive: a
# module's broker, the session's JVM), to find where `make test`'s time goes
_CPU_LOG = __import__("os").environ.get("COMPACTLOG_TEST_CPU_LOG")


def _descendant_cpu() -> dict[int, float]:
    import os
    tick = os.sysconf("SC_CLK_TCK")
    parents: dict[int, int] = {}
    cpu: dict[int, float] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        cpu[int(entry)] = (int(fields[11]) + int(fields[12]) + int(fields[13]) + int(fields[14])) / tick
    me = os.getpid()
    found, frontier = {}, [me]
    while frontier:
        pid = frontier.pop()
        for child, parent in parents.items():
            if parent == pid and child not in found:
                found[child] = cpu[child]
                frontier.append(child)
    _children_now.clear()
    _children_now.update(p for p in found if parents[p] == me)
    return found


_children_now: set[int] = set()          # this process's own children at the last _descendant_cpu()


_module_start: dict = {}


if _CPU_LOG:
    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(item, nextitem):
        import json
        import os
        import time
        module = item.path.stem
        if _module_start.get("module") != module:
            t = os.times()
            _module_start.update(module=module, wall=time.monotonic(),
                                 own=t.user + t.system + t.children_user + t.children_system,
                                 live=_descendant_cpu(), children=set(_children_now))
        yield
        if nextitem is None or nextitem.path.stem != module:
            t = os.times()
            own = t.user + t.system + t.children_user + t.children_system - _module_start["own"]
            before = _module_start["live"]
            after = _descendant_cpu()
            live = sum(c - before.get(p, 0.0) for p, c in after.items())
            # a child of this process alive at the module's start and reaped during it (subprocess
            # reaps an earlier module's finished child at its next Popen) brings its whole life's
            # CPU into ``own``: what it had used before is not this module's. Without this the
            # background CDS build's ~46 CPU-s were counted again in whichever module of that worker
            # reaped it (test_groups_clients: 48.6 CPU-s in 27 s of wall). Only children that are
            # gone: a deeper descendant that left the tree (orphaned when its parent exited, as
            # pyspark's daemon when its JVM stops) took its CPU elsewhere, not into ``own``
            live -= sum(before[p] for p in _module_start["children"]
                        if p not in after and not os.path.exists(f"/proc/{p}"))
            with open(_CPU_LOG, "a") as f:
                f.write(json.dumps({"module": module, "wall": round(time.monotonic() - _module_start["wall"], 2),
                                    "cpu": round(own + live, 2), "own": round(own, 2),
                                    "live": round(live, 2)}) + "\n")
            _module_start.clear()
