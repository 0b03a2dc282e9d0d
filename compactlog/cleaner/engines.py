"""The executor factory of ``serve``, ``cleaner run`` and ``clean``: which engine runs the tasks.

Engines other than this process are registered by name and the dotted path of their executor
class, and imported only when one is chosen: a Spark master or ``--engine spark`` given, or the
cost model choosing Spark for a round (``AutoExecutor``). The broker and the cleaner load no
``spark/`` module and no PySpark before that, and the floors stay as they are (cleaner below
server and spark: nothing here imports spark/ at module level). A registered executor class
offers ``require()`` (raise the one-line error when it cannot start here, e.g. no Java for
Spark) and ``unavailable()`` (that reason, or None).

Kafka has one engine (its cleaner threads); the choice per round is compactlog's own.
"""

from __future__ import annotations

import importlib

from .executor import MODEL, CostModel, EngineChoice, InProcessExecutor, plan_bytes, spark_running
from .task import PartitionCleanPlan

# name -> "module:Class", imported on first use
ENGINES: dict[str, str] = {"spark": "compactlog.spark.executor:SparkExecutor"}


def register_engine(name: str, target: str) -> None:
    """Register the executor class ``target`` ("package.module:Class") under ``name``."""
    ENGINES[name] = target


def engine_class(name: str):
    """The executor class registered as ``name``, imported now."""
    try:
        module, _, attr = ENGINES[name].partition(":")
    except KeyError:
        raise ValueError(f"unknown engine {name!r}: use auto, spark or local") from None
    return getattr(importlib.import_module(module), attr)


class AutoExecutor:
    """Spark when it would finish sooner, this process otherwise (the results are identical).

    A round goes to Spark when a key map too big for one task was chosen (only Spark builds a
    distributed map: the round does not fit this process) or when the cost model says a local
    Spark would finish sooner (large rounds over several partitions, or a session already
    running); ``--engine spark`` or a Spark master always uses Spark. The Spark executor is made
    (and spark/ imported) the first time a round goes there.
    """

    name = "auto"

    def __init__(self, master: str | None = None, model: CostModel = MODEL):
        self.master = master
        self.model = model
        self._spark_executor = None
        self.local_executor = InProcessExecutor()
        self.choice: EngineChoice | None = None

    @property
    def spark_executor(self):
        if self._spark_executor is None:
            self._spark_executor = engine_class("spark")(self.master)
        return self._spark_executor

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
        warm = (self._spark_executor is not None and self._spark_executor._spark is not None) or spark_running()
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
    if choice.engine != "spark" or spark_running():
        return choice
    problem = engine_class("spark").unavailable()
    if problem is None:
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
        cls = engine_class("spark")
        cls.require()       # one line now, not JAVA_GATEWAY_EXITED once the first round starts Spark
        ex = cls(master)
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
