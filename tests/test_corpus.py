"""Kafka's real cleaner output, reproduced: every case of the corpus, every round.

Uncompressed cases must match byte for byte (.log, .index, .timeindex, .txnindex, checkpoint);
compressed ones record for record (FORMAT.md §3). The cleaner runs on Spark through its public
entry point, with one shared SparkSession; the statistics of each round must equal Kafka's too.
"""

from __future__ import annotations

import os

import pytest

from corpus_support import case_names, expected_clean_line, run_case_api, run_cases_api_lockstep

CASES = case_names()
STATS = ["firstDirtyOffset", "firstUncleanableOffset", "endOffset", "messagesRead", "bytesRead",
         "messagesWritten", "mapMessagesRead", "mapBytesRead", "invalidMessagesRead"]


def test_the_case_list_names_every_case_of_the_archive(corpus_dir):
    """The tests parametrize on tests/data/kafka-cleaner-corpus.cases: it must name every case
    the archive holds, and no other."""
    assert CASES == sorted(os.listdir(os.path.join(corpus_dir, "cases"))) and len(CASES) >= 90


@pytest.fixture(scope="module")
def spark_executor(spark):
    from compactlog.spark.executor import SparkExecutor
    return SparkExecutor(spark=spark)


def _rounds(runs: dict, name: str):
    """One case's rounds from a lockstep run (its own exception re-raised in its own test)."""
    result = runs[name]
    if isinstance(result, BaseException):
        raise result
    return result


@pytest.fixture(scope="module")
def spark_runs(corpus_dir, spark_executor, tmp_path_factory):
    """Every case cleaned on Spark at once, each in its own data dir: each round of all cases is
    one Spark job (corpus_support.LockstepExecutor), as the broker cleans many partitions."""
    return run_cases_api_lockstep(corpus_dir, CASES, str(tmp_path_factory.mktemp("spark-runs")),
                                  spark_executor)


@pytest.fixture(scope="module")
def distributed_runs(corpus_dir, spark_executor, tmp_path_factory):
    return run_cases_api_lockstep(corpus_dir, CASES, str(tmp_path_factory.mktemp("distributed-runs")),
                                  spark_executor, {"compactlog.cleaner.map": "distributed"})


@pytest.mark.parametrize("name", CASES)
def test_case_on_spark(name, corpus_dir, spark_runs):
    for k, diffs, outcomes in _rounds(spark_runs, name):
        assert not diffs, f"round {k}: " + "\n".join(diffs[:10])
        expected = expected_clean_line(corpus_dir, name, k)
        (out,) = outcomes
        assert out.error is None
        assert out.cleaned == expected["cleaned"], f"round {k}"
        if out.cleaned:
            mine = out.to_dict()
            fields = STATS + ([] if "compression" in name or _compressed(corpus_dir, name) else ["bytesWritten"])
            assert {f: mine[f] for f in fields} == {f: expected[f] for f in fields}, f"round {k}"
            assert mine["cleanableRatio"] == pytest.approx(expected["cleanableRatio"], abs=1e-12)


def _compressed(corpus_dir, name) -> bool:
    from corpus_support import load_case
    return load_case(corpus_dir, name)["compressed"]


@pytest.fixture
def per_batch_path_only():
    from compactlog.cleaner import fast_path
    fast_path.ENABLED = False
    yield
    fast_path.ENABLED = True


@pytest.mark.parametrize("name", CASES)
def test_case_per_batch_path(name, corpus_dir, tmp_path, per_batch_path_only):
    """The same cases in this process with the whole-segment kernels off: both paths equal Kafka."""
    from compactlog.cleaner.executor import InProcessExecutor
    for k, diffs, outcomes in run_case_api(corpus_dir, name, str(tmp_path / "d"), InProcessExecutor()):
        assert not diffs, f"round {k}: " + "\n".join(diffs[:10])
        assert outcomes[0].error is None


@pytest.mark.parametrize("name", CASES)
def test_case_with_distributed_map(name, corpus_dir, distributed_runs):
    """The key map built by Spark (scan tasks, a shuffle for the latest offset per key, winners fed
    to the rewrite task per partition): the same files as Kafka, and the same map statistics."""
    for k, diffs, outcomes in _rounds(distributed_runs, name):
        assert not diffs, f"round {k}: " + "\n".join(diffs[:10])
        (out,) = outcomes
        assert out.error is None
        if out.cleaned:
            assert out.map_kind == "distributed"
            expected = expected_clean_line(corpus_dir, name, k)
            mine = out.to_dict()
            assert (mine["mapMessagesRead"], mine["mapBytesRead"], mine["endOffset"]) == \
                (expected["mapMessagesRead"], expected["mapBytesRead"], expected["endOffset"])
