"""The cleaner's tasks on Spark, and the executor factory of ``serve``, ``cleaner run`` and ``clean``.

``SparkExecutor`` runs the same guarded ``clean_partition`` tasks as ``cleaner.executor``'s
``InProcessExecutor``, a task per big partition and small ones packed, or builds the key map on
Spark (``cleaner.distributed_map``) when a plan asks for it; only small results travel back.
``AutoExecutor`` picks the engine per round from the cost model (``cleaner.executor.CostModel``).
"""

from __future__ import annotations

from ..cleaner.distributed_map import run_distributed
from ..cleaner.executor import (MODEL, CostModel, EngineChoice, InProcessExecutor, pack_plans,
                                plan_bytes, run_guarded, spark_running)
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


class AutoExecutor:
    """Spark when it would finish sooner, this process otherwise (the results are identical).

    A round goes to Spark when a key map too big for one task was chosen (only Spark builds a
    distributed map: the round does not fit this process) or when the cost model says a local
    Spark would finish sooner (large rounds over several partitions, or a session already
    running); ``--engine spark`` or a Spark master always uses Spark.
    """

    name = "auto"

    def __init__(self, master: str | None = None, model: CostModel = MODEL):
        self.model = model
        self.spark_executor = SparkExecutor(master)
        self.local_executor = InProcessExecutor()
        self.choice: EngineChoice | None = None

    @property
    def last_choice(self) -> str:
        return self.choice.text() if self.choice else ""

    def choose(self, plans: list[PartitionCleanPlan]) -> EngineChoice:
        return without_java(self._choose(plans))

    def _choose(self, plans: list[PartitionCleanPlan]) -> EngineChoice:
        if any(p.map_kind == "distributed" for p in plans):
            big = [f"{p.topic}-{p.partition}" for p in plans if p.map_kind == "distributed"]
            return EngineChoice("spark", f"the key map of {', '.join(big)} does not fit one task's memory "
                                         f"(compactlog.cleaner.task.memory.bytes): Spark builds it")
        warm = self.spark_executor._spark is not None or spark_running()
        return self.model.choose("clean", [plan_bytes(p) for p in plans], warm=warm, what="to rewrite")

    def run(self, plans: list[PartitionCleanPlan]) -> list:
        if not plans:
            return []
        self.choice = self.choose(plans)
        executor = self.spark_executor if self.choice.engine == "spark" else self.local_executor
        return executor.run(plans)


def without_java(choice: EngineChoice) -> EngineChoice:
    """An automatic choice of Spark stays in this process when no Java 17+ can start Spark (the
    results are the same; an in-task map replaces a distributed one)."""
    if choice.engine != "spark" or spark_running() or java_problem() is None:
        return choice
    return EngineChoice("in-process", f"{choice.reason}; but no Java 17+ was found for Spark (JAVA_HOME or "
                                      f"java on PATH)", choice.local_s, choice.spark_s)


def spark_master_for(spark_master: str | None, broker) -> str | None:
    """The Spark master a command cleans with: ``--spark-master``, else compactlog.spark.master,
    except its default ``local[*]``, which only means "a local Spark when the cost model says so"."""
    master = spark_master or broker.get("compactlog.spark.master")
    if spark_master is None and master == "local[*]":
        return None
    return master


def make_executor(engine: str = "auto", master: str | None = None, model: CostModel = MODEL):
    """The executor of ``serve``, ``cleaner run`` and ``clean``: in-process for ``local``, Spark for
    ``spark`` or with a master, else ``AutoExecutor`` (by the cost model, per round)."""
    if engine == "spark" or master and engine == "auto":
        require_java()      # one line now, not JAVA_GATEWAY_EXITED once the first round starts Spark
        ex = SparkExecutor(master)
        ex.choice = EngineChoice("spark", f"a Spark master was given ({master})" if master and engine == "auto"
                                 else "--engine spark")
        return ex
    if engine in ("local", "in-process"):
        ex = InProcessExecutor()
        ex.choice = EngineChoice("in-process", "--engine local")
        return ex
    if engine == "auto":
        return AutoExecutor(master, model)
    raise ValueError(f"unknown engine {engine!r}: use auto, spark or local")
