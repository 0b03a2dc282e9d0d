"""Where partition cleaning tasks run: a Spark job (the default) or this process (tests, tools).

Both run the same ``clean_partition`` on the same plans; only small results travel back.
"""

from __future__ import annotations

import traceback
from dataclasses import dataclass

from ..errors import CompactlogError
from .task import PartitionCleanPlan, PartitionCleanResult, clean_partition


@dataclass
class TaskFailure:
    topic: str
    partition: int
    error: str
    kind: str

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def run_guarded(plan: PartitionCleanPlan):
    """One task; an error becomes a TaskFailure so that the other partitions go on."""
    try:
        return clean_partition(plan)
    except CompactlogError as e:
        return TaskFailure(plan.topic, plan.partition, str(e), type(e).__name__)
    except Exception as e:  # noqa: BLE001 - reported per partition, like Kafka's uncleanable set
        return TaskFailure(plan.topic, plan.partition,
                           f"{type(e).__name__}: {e} ({traceback.format_exc(limit=3).splitlines()[-2].strip()})",
                           type(e).__name__)


class InProcessExecutor:
    name = "in-process"

    def run(self, plans: list[PartitionCleanPlan]) -> list:
        return [run_guarded(p) for p in plans]


class SparkExecutor:
    """One Spark task per partition; partitions clean in parallel on local[*] or a cluster."""

    name = "spark"

    def __init__(self, master: str | None = None, spark=None):
        self.master = master
        self._spark = spark

    @property
    def spark(self):
        if self._spark is None:
            from ..spark.session import session
            self._spark = session(self.master)
        return self._spark

    def run(self, plans: list[PartitionCleanPlan]) -> list:
        if not plans:
            return []
        sc = self.spark.sparkContext
        rdd = sc.parallelize(plans, len(plans))
        sc.setJobDescription(f"compactlog clean: {len(plans)} partition(s)")
        return rdd.map(run_guarded).collect()


class AutoExecutor:
    """Spark for rounds worth a JVM, this process for small ones (the results are identical).

    A cold Spark session costs about 10 s; a round with less than ``threshold_bytes`` of segments to
    rewrite finishes sooner in this process. ``--engine spark`` always uses Spark.
    """

    name = "auto"

    def __init__(self, threshold_bytes: int = 16 << 20, master: str | None = None):
        self.threshold_bytes = threshold_bytes
        self.spark_executor = SparkExecutor(master)
        self.local_executor = InProcessExecutor()
        self.last_choice = ""

    def choose(self, plans: list[PartitionCleanPlan]):
        work = sum(s.log_bytes for p in plans for s in p.segments if s.base_offset < p.first_uncleanable)
        if work >= self.threshold_bytes or len(plans) > 1 and work >= self.threshold_bytes // 4:
            self.last_choice = f"spark ({work} bytes to rewrite)"
            return self.spark_executor
        self.last_choice = f"in-process ({work} bytes to rewrite, below {self.threshold_bytes})"
        return self.local_executor

    def run(self, plans: list[PartitionCleanPlan]) -> list:
        if not plans:
            return []
        return self.choose(plans).run(plans)


def make_executor(engine: str = "auto", master: str | None = None, threshold_bytes: int = 16 << 20):
    if master and engine == "auto":
        engine = "spark"
    if engine == "spark":
        return SparkExecutor(master)
    if engine in ("local", "in-process"):
        return InProcessExecutor()
    if engine == "auto":
        return AutoExecutor(threshold_bytes, master)
    raise ValueError(f"unknown engine {engine!r}: use auto, spark or local")
