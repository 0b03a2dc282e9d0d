"""The corpus contract end to end through the command line (how the hidden cases are run):
copy input/, `topics alter` with the case's topic configs, then per round
`compactlog --data-dir D --override K=V ... clean --now-ms NOW`, and compare with Kafka's output."""

from __future__ import annotations

import pytest

from corpus_support import run_case_cli

CASES = ["kt-c14b-commit-marker-removal-staged", "kt-c32-grouping-sparse-empty-segments",
         "kt-c53b-min-compaction-lag-zstd", "rnd-054-transactions", "rnd-114-incremental",
         "rnd-120-ratio", "kt-c26b-open-txn-blocks-cleaning"]


@pytest.mark.parametrize("name", CASES)
def test_case_through_the_cli(name, corpus_dir, tmp_path):
    rounds = run_case_cli(corpus_dir, name, str(tmp_path / "d"))
    assert rounds
    for k, diffs, _ in rounds:
        assert not diffs, f"round {k}: " + "\n".join(diffs[:10])


def test_case_through_the_cli_on_spark(corpus_dir, tmp_path):
    # one round (each round is a command of its own, so a JVM of its own), through the installed
    # command in a process of its own as the hidden cases run: an aborted transaction's
    # batches removed, the producer's last sequence kept; every case runs on Spark in test_corpus
    rounds = run_case_cli(corpus_dir, "kt-c26a-last-seq-kept-if-aborted", str(tmp_path / "d"),
                          clean_args=("--engine", "spark", "--json"), process=True)
    for k, diffs, out in rounds:
        assert not diffs, f"round {k}: " + "\n".join(diffs[:10])
        assert '"engine": "spark"' in out
