"""`make test`'s scheduler: pytest-xdist's ``--dist loadfile`` (each test file on one worker, the
longest first), except that the files with a test in the ``spark`` lane go to at most
``COMPACTLOG_TEST_SPARK_WORKERS`` workers (2 by default).

Why: the session's SparkSession (tests/conftest.py's ``spark`` fixture) is started by every worker
that runs a test needing it, ~13 CPU-s of JVM start each; under plain loadfile all four workers of
`make test` started one. A worker that took a Spark file keeps taking the Spark files first (only
such workers may run them); the others take the rest in the usual order, and stop when only Spark
files are left.

Which files need Spark is known only where the tests are collected, in the workers (the lanes are
markers set in the root conftest.py), while the scheduler runs in the controller, which sees test
ids alone: each worker writes the Spark files it collected to ``<COMPACTLOG_TEST_LANES_FILE>.<worker
id>`` before it reports its collection, and the scheduler reads them when it hands out the work.
Without those files (a plugin that collects elsewhere, a write that failed) it is plain loadfile.
"""

from __future__ import annotations

import json
import os

from xdist.scheduler import LoadFileScheduling

LANES_FILE_ENV = "COMPACTLOG_TEST_LANES_FILE"
SPARK_WORKERS_ENV = "COMPACTLOG_TEST_SPARK_WORKERS"


def spark_workers() -> int:
    return max(1, int(os.environ.get(SPARK_WORKERS_ENV, "2")))


def write_worker_lanes(path: str, worker: str, spark_files: set[str]) -> None:
    """A worker's Spark files (the test-id prefixes xdist's loadfile groups by), written whole or
    not at all (the controller may read it at any time after)."""
    partial = f"{path}.{worker}.partial"
    with open(partial, "w") as f:
        json.dump(sorted(spark_files), f)
    os.replace(partial, f"{path}.{worker}")


def read_lanes(path: str, workers: list[str]) -> set[str] | None:
    """The Spark files, from the first worker whose list is there (all collected the same tests:
    xdist checks it), or None."""
    for worker in workers:
        try:
            with open(f"{path}.{worker}") as f:
                return set(json.load(f))
        except (OSError, ValueError):
            continue
    return None


class SparkConfinedScheduling(LoadFileScheduling):
    """LoadFileScheduling whose Spark files run on at most ``limit`` workers (see the module doc)."""

    def __init__(self, config, log=None, *, lanes_file: str | None = None, limit: int | None = None):
        super().__init__(config, log)
        self.lanes_file = lanes_file
        self.limit = limit if limit is not None else spark_workers()
        self.spark_nodes: set = set()
        self._spark_files: set[str] | None = None

    def spark_files(self) -> set[str]:
        if self._spark_files is None:
            found = read_lanes(self.lanes_file, [n.gateway.id for n in self.nodes]) if self.lanes_file else None
            if found is None:
                return set()            # not (yet) known: plain loadfile for this unit
            self._spark_files = found
        return self._spark_files

    def _pick(self, node) -> str | None:
        """The scope ``node`` takes next: a Spark node its first Spark file, else the first file;
        while fewer than ``limit`` nodes have run Spark, any node the first file; otherwise the
        first file that needs no Spark. None: nothing this node may run."""
        spark = self.spark_files()
        if not spark:
            return next(iter(self.workqueue), None)
        if node in self.spark_nodes:
            return next((s for s in self.workqueue if s in spark), None) or next(iter(self.workqueue), None)
        if len(self.spark_nodes) < self.limit:
            scope = next(iter(self.workqueue), None)
            if scope in spark:
                self.spark_nodes.add(node)
            return scope
        return next((s for s in self.workqueue if s not in spark), None)

    def _assign_work_unit(self, node) -> None:
        scope = self._pick(node)
        if scope is None:
            return
        self.workqueue.move_to_end(scope, last=False)
        super()._assign_work_unit(node)         # pops the first unit: the one picked

    def _reschedule(self, node) -> None:
        if node.shutting_down:
            return
        if not self.workqueue:
            node.shutdown()
            return
        if self._pending_of(self.assigned_work[node]) > 2:
            return
        if self._pick(node) is None:
            # only Spark files are left and this node may not run them: done, unless it still
            # has tests of its own to finish (it is asked again after each of them)
            if not self._pending_of(self.assigned_work[node]):
                node.shutdown()
            return
        self._assign_work_unit(node)

    def remove_node(self, node):
        # a crashed Spark node's place goes to whichever node asks next (xdist may start another)
        self.spark_nodes.discard(node)
        return super().remove_node(node)
