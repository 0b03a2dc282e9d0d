"""The cleaner's tasks on Spark: the engine ``cleaner.engines`` registers as "spark".

``SparkExecutor`` runs the same guarded ``clean_partition`` tasks as ``cleaner.executor``'s
``InProcessExecutor``, a task per big partition and small ones packed, or builds the key map on
Spark (``cleaner.distributed_map``) when a plan asks for it; only small results travel back. The
factory and ``AutoExecutor`` (the engine per round, by the cost model) are ``cleaner.engines``'s,
which imports this module only when Spark is chosen; they are named here too for old callers.
"""

from __future__ import annotations

import re

from ..cleaner.distributed_map import run_distributed
from ..cleaner.engines import AutoExecutor, make_executor, spark_master_for, without_java  # noqa: F401
from ..cleaner.executor import EngineChoice, pack_plans, run_guarded
from ..cleaner.task import PartitionCleanPlan
from ..errors import CompactlogError
from .java import java_problem, require_java


def _run_bin(indexed_plans):
    return [(i, run_guarded(p)) for i, p in indexed_plans]


def job_failure(e: Exception) -> CompactlogError | None:
    """The one-line error of a Spark job that failed outside the tasks' own guard (a Python worker
    killed, by kill -9 or the OOM killer: each task's errors are caught by run_guarded), else None.
    It was an internal error (exit 70) with Spark's Java stack traces, ~100 lines."""
    text = str(e)
    if "SparkException" not in text:
        return None
    m = re.search(r"most recent failure: (Lost task [0-9.]+ in stage [0-9.]+)[^:]*: (?:\S+Exception: )?([^\n]+)",
                  text)
    reason = f"{m.group(2).split('. Consider ')[0].rstrip('.')} ({m.group(1)})" if m else text.splitlines()[0][:300]
    return CompactlogError(f"the clean's Spark job failed: {reason}; a partition it had not swapped in is "
                           f"as before, and a clean run again finishes the job")


class SparkExecutor:
    """Partitions cleaned in parallel Spark tasks (a task per big partition, small ones packed)."""

    name = "spark"
    choice: "EngineChoice | None" = None

    def __init__(self, master: str | None = None, spark=None):
        self.master = master
        self._spark = spark

    @staticmethod
    def require() -> None:
        """The one-line error when Spark cannot start here (no Java 17+)."""
        require_java()

    @staticmethod
    def unavailable() -> str | None:
        """Why Spark cannot start here, or None."""
        return java_problem()

    @property
    def last_choice(self) -> str:
        return self.choice.text() if self.choice else self.name

    @property
    def spark(self):
        if self._spark is None:
            from .session import session
            self._spark = session(self.master)
        return self._spark

    def run(self, plans: list[PartitionCleanPlan]) -> list:
        if not plans:
            return []
        try:
            return self._run(plans)
        except Exception as e:      # noqa: BLE001 - py4j's error, named without importing py4j
            failure = job_failure(e)
            if failure is None:
                raise
            raise failure from None

    def _run(self, plans: list[PartitionCleanPlan]) -> list:
        sc = self.spark.sparkContext
        # results are matched to plans by position: plans of several data dirs may name the same
        # topic-partition
        results: list = [None] * len(plans)
        local = [i for i, p in enumerate(plans) if p.map_kind != "distributed"]
        if local:
            position = {id(plans[i]): i for i in local}
            bins = pack_plans([plans[i] for i in local], max(2 * sc.defaultParallelism, 1))
            indexed = [[(position[id(p)], p) for p in b] for b in bins]
            sc.setJobDescription(f"compactlog clean: {len(local)} partition(s) in {len(bins)} task(s)")
            for i, r in sc.parallelize(indexed, len(indexed)).flatMap(_run_bin).collect():
                results[i] = r
        distributed = [i for i, p in enumerate(plans) if p.map_kind == "distributed"]
        if distributed:
            for i, r in zip(distributed, run_distributed(self.spark, [plans[i] for i in distributed])):
                results[i] = r
        return results
