"""Where partition cleaning tasks run: a Spark job (the default) or this process (tests, tools).

Both run the same ``clean_partition`` on the same plans; only small results travel back.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass

from ..errors import CompactlogError
from .task import PartitionCleanPlan, clean_partition


@dataclass
class TaskFailure:
    topic: str
    partition: int
    error: str
    kind: str

    @property
    def name(self) -> str:
        return f"{self.topic}-{self.partition}"


def run_guarded(plan: PartitionCleanPlan, offset_map=None):
    """One task; an error becomes a TaskFailure so that the other partitions go on."""
    try:
        return clean_partition(plan, offset_map)
    except CompactlogError as e:
        return TaskFailure(plan.topic, plan.partition, str(e), type(e).__name__)
    except OSError as e:
        # disk full, permissions: name the file (the partition dir when the error has none)
        where = os.fsdecode(e.filename) if e.filename is not None else plan.dir
        return TaskFailure(plan.topic, plan.partition, f"{where}: {e.strerror or e}", type(e).__name__)
    except Exception as e:  # noqa: BLE001 - reported per partition, like Kafka's uncleanable set
        return TaskFailure(plan.topic, plan.partition,
                           f"{type(e).__name__}: {e} ({traceback.format_exc(limit=3).splitlines()[-2].strip()})",
                           type(e).__name__)


class InProcessExecutor:
    name = "in-process"

    def run(self, plans: list[PartitionCleanPlan]) -> list:
        for p in plans:
            if p.map_kind == "distributed":   # there is no Spark here to build it
                p.map_kind = "task"
                p.extra["map_reason"] = "in-process engine: " + p.extra.get("map_reason", "")
        return [run_guarded(p) for p in plans]


def plan_bytes(plan: PartitionCleanPlan) -> int:
    return sum(s.log_bytes for s in plan.segments if s.base_offset < plan.first_uncleanable)


def pack_plans(plans: list[PartitionCleanPlan], slots: int) -> list[list[PartitionCleanPlan]]:
    """Partitions into at most ``slots`` tasks of similar size: a big partition gets a task of its
    own, small ones share one, so cleaning many small partitions costs a few tasks, not many."""
    slots = max(1, min(slots, len(plans)))
    bins: list[list] = [[] for _ in range(slots)]
    loads = [0] * slots
    for plan in sorted(plans, key=plan_bytes, reverse=True):
        i = loads.index(min(loads))
        bins[i].append(plan)
        loads[i] += plan_bytes(plan) + 1
    return [b for b in bins if b]


def _run_bin(plans):
    return [run_guarded(p) for p in plans]


class SparkExecutor:
    """Partitions cleaned in parallel Spark tasks (a task per big partition, small ones packed)."""

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
        local = [p for p in plans if p.map_kind != "distributed"]
        results = {}
        if local:
            bins = pack_plans(local, max(2 * sc.defaultParallelism, 1))
            sc.setJobDescription(f"compactlog clean: {len(local)} partition(s) in {len(bins)} task(s)")
            for r in sc.parallelize(bins, len(bins)).flatMap(_run_bin).collect():
                results[(r.topic, r.partition)] = r
        distributed = [p for p in plans if p.map_kind == "distributed"]
        if distributed:
            from .distributed_map import run_distributed
            for r in run_distributed(self.spark, distributed):
                results[(r.topic, r.partition)] = r
        return [results[(p.topic, p.partition)] for p in plans]


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
        if any(p.map_kind == "distributed" for p in plans):
            self.last_choice = "spark (a distributed key map was chosen)"
            return self.spark_executor
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
