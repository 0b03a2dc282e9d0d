"""Running partition cleaning tasks in this process, and the cost model that chooses an engine.

A task is ``clean_partition`` on a plan, guarded so that one partition's failure becomes a
``TaskFailure`` while the others go on. ``InProcessExecutor`` runs them here; Spark's executor
(``spark/executor.py``, registered in ``engines.py``, where ``AutoExecutor`` chooses per round)
runs the same tasks on a Spark job. ``CostModel`` is fitted to ``benchmarks/engine_crossover.py``;
``snapshot`` asks it too.
"""

from __future__ import annotations

import os
import traceback
from dataclasses import dataclass
from typing import NamedTuple

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
    choice: "EngineChoice | None" = None
    # told of each partition as it starts and ends (``task_started(plan)``, ``task_done(plan,
    # result)``): the CLI's progress display; None in the broker
    progress = None

    @property
    def last_choice(self) -> str:
        return self.choice.text() if self.choice else self.name

    def run(self, plans: list[PartitionCleanPlan]) -> list:
        for p in plans:
            if p.map_kind == "distributed":   # there is no Spark here to build it
                p.map_kind = "task"
                p.extra["map_reason"] = "in-process engine: " + p.extra.get("map_reason", "")
        progress = self.progress
        if progress is None:
            return [run_guarded(p) for p in plans]
        results = []
        for p in plans:
            progress.task_started(p)
            results.append(run_guarded(p))
            progress.task_done(p, results[-1])
        return results


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


class EngineChoice(NamedTuple):
    """Which engine runs a job and why (for ``--json`` and the run log)."""
    engine: str                  # "in-process" or "spark"
    reason: str
    local_s: float | None = None
    spark_s: float | None = None

    def text(self) -> str:
        return f"{self.engine} ({self.reason})"


@dataclass(frozen=True)
class CostModel:
    """Seconds a job takes in this process and on a local Spark, fitted to the measurements of
    ``benchmarks/engine_crossover.py`` on the project's reference machine (2 cores; README,
    "Where jobs run"). Both engines run the same code: in this process one partition after
    another; on Spark ``min(partitions, cores)`` at once, after the JVM, the session and the
    Python workers start (cold) or, with a session already running here, a job's scheduling cost
    (warm). The command's own start (Python, imports, numba's cached kernels) is paid either way.
    """
    clean_local_mb_s: float = 520.0        # MB of segments rewritten per second, one partition at a time
    clean_spark_mb_s: float = 420.0        # per Spark task
    clean_spark_cold_s: float = 10.5       # JVM, session and Python workers, before the first task
    clean_spark_warm_s: float = 0.26       # a job on a running session
    snapshot_local_mb_s: float = 420.0     # MB of log read and reduced per second
    snapshot_spark_mb_s: float = 50.0      # per Spark task (the shuffle of the group-by dominates)
    snapshot_spark_cold_s: float = 14.0
    snapshot_spark_warm_s: float = 0.55
    cores: int = os.cpu_count() or 1

    def seconds(self, kind: str, part_bytes: list[int], warm: bool) -> tuple[float, float]:
        """(in this process, on local Spark) for partitions of these sizes."""
        local_rate = getattr(self, f"{kind}_local_mb_s") * 1e6
        spark_rate = getattr(self, f"{kind}_spark_mb_s") * 1e6
        start = getattr(self, f"{kind}_spark_{'warm' if warm else 'cold'}_s")
        total = sum(part_bytes)
        slots = max(1, min(self.cores, len(part_bytes)))
        # Spark's tasks: the biggest partition, or an even share of the total per core
        spark_work = max(max(part_bytes, default=0), total / slots)
        return total / local_rate, start + spark_work / spark_rate

    def choose(self, kind: str, part_bytes: list[int], *, warm: bool, what: str) -> EngineChoice:
        local_s, spark_s = self.seconds(kind, part_bytes, warm)
        mb = sum(part_bytes) / 1e6
        where = f"{mb:.1f} MB {what} in {len(part_bytes)} partition(s)"
        session = "a running Spark session" if warm else "a local Spark (JVM start included)"
        if spark_s < local_s:
            return EngineChoice("spark", f"{where}: ~{spark_s:.1f} s on {session} with {min(self.cores, len(part_bytes))} "
                                         f"task(s) at once vs ~{local_s:.1f} s in this process", local_s, spark_s)
        return EngineChoice("in-process", f"{where}: ~{local_s:.1f} s in this process vs ~{spark_s:.1f} s on "
                                          f"{session}", local_s, spark_s)


MODEL = CostModel()


def spark_running() -> bool:
    """Is a Spark session already up in this process (a warm start)?"""
    import sys
    mod = sys.modules.get("compactlog.spark.session")
    s = getattr(mod, "_session", None) if mod is not None else None
    try:
        return s is not None and not s.sparkContext._jsc.sc().isStopped()
    except Exception:   # noqa: BLE001 - a session in a bad state is not a warm one
        return False
