"""The cleaner's tasks on Spark: the engine ``cleaner.engines`` registers as "spark".

``SparkExecutor`` runs the same guarded ``clean_partition`` tasks as ``cleaner.executor``'s
``InProcessExecutor``, a task per big partition and small ones packed, or builds the key map on
Spark (``cleaner.distributed_map``) when a plan asks for it; only small results travel back. The
factory and ``AutoExecutor`` (the engine per round, by the cost model) are ``cleaner.engines``'s,
which imports this module only when Spark is chosen; they are named here too for old callers.
"""

from __future__ import annotations

from ..cleaner.distributed_map import run_distributed
from ..cleaner.engines import AutoExecutor, make_executor, spark_master_for, without_java  # noqa: F401
from ..cleaner.executor import EngineChoice, pack_plans, run_guarded
from ..cleaner.task import PartitionCleanPlan
from .java import java_problem, require_java


def _run_bin(indexed_plans):
    return [(i, run_guarded(p)) for i, p in indexed_plans]


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
