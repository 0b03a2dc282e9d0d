"""What ``clean`` and ``cleaner run`` show while they clean, and the line they end with.

On a terminal (stderr), a bar per round over the bytes the round's partitions read, with the
partitions done out of the round's and the partition being cleaned now (in this process the
executor tells each partition as it starts and ends: ``InProcessExecutor.progress``; on Spark the
finished tasks of the running stages); between the rounds of ``cleaner run``, a line with the
totals so far. Nothing of it anywhere else, and it goes when the command ends. The summary line
(``CleanTotals.text``) is printed at the end on a terminal or not: partitions cleaned and failed,
records removed, bytes read, the cleaned sections' size before and after, the time taken.
"""

from __future__ import annotations

import threading
import time

from ..cleaner.executor import InProcessExecutor, plan_bytes


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{int(value)} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


class CleanTotals:
    """What the rounds of one command did, from their outcomes (``PartitionOutcome``)."""

    def __init__(self):
        self.rounds = 0
        self.cleaned = 0
        self.failed = 0
        self.stopped = 0
        self.records_read = 0
        self.records_removed = 0
        self.bytes_read = 0
        self.size_before = 0
        self.size_after = 0
        self.started = time.monotonic()

    def add(self, outcomes) -> None:
        self.rounds += 1
        for o in outcomes:
            if o.error:
                self.failed += 1
            elif o.aborted:
                self.stopped += 1
            elif o.cleaned:
                self.cleaned += 1
                s = o.stats
                if s is not None:
                    self.records_read += s.messages_read
                    self.records_removed += max(s.messages_read - s.messages_written, 0)
                    self.bytes_read += s.bytes_read
                self.size_before += o.start_size
                self.size_after += o.end_size

    def text(self, engine: str | None = None, *, rounds: bool = False) -> str:
        """``cleaned 2 partition(s) in 0.4 s (in-process): 1.2 MiB read, 1,234 of 5,678 records
        removed, 1.2 MiB -> 310.0 KiB``, then what failed or stopped."""
        elapsed = time.monotonic() - self.started
        head = f"{self.rounds} round(s), " if rounds else ""
        line = (f"{head}cleaned {self.cleaned} partition(s) in {elapsed:.1f} s"
                + (f" ({engine})" if engine else ""))
        if self.cleaned:
            line += (f": {human_bytes(self.bytes_read)} read, {self.records_removed:,d} of {self.records_read:,d} "
                     f"records removed, {human_bytes(self.size_before)} -> {human_bytes(self.size_after)}")
        if self.failed:
            line += f"; {self.failed} failed"
        if self.stopped:
            line += f"; {self.stopped} stopped for a change of the log (cleaned again later)"
        return line


def _local_executors(executor) -> list[InProcessExecutor]:
    """The in-process executors a round may run on (an AutoExecutor's local one)."""
    found = [executor] if isinstance(executor, InProcessExecutor) else []
    local = getattr(executor, "local_executor", None)
    if isinstance(local, InProcessExecutor):
        found.append(local)
    return found


def _spark_fraction(executor) -> float | None:
    """Finished tasks of the running Spark stages, as a fraction; None when Spark is not running."""
    # an AutoExecutor's Spark executor exists once a round went to Spark (spark/ is imported then)
    inner = getattr(executor, "_spark_executor", None) or executor
    if getattr(inner, "_spark", None) is None:
        return None
    tracker = inner._spark.sparkContext.statusTracker()
    done = total = 0
    for sid in tracker.getActiveStageIds():
        info = tracker.getStageInfo(sid)
        if info:
            done += info.numCompletedTasks
            total += info.numTasks
    return done / total if total else None


class CleanProgress:
    """The executor ``clean`` and ``cleaner run`` hand to the cleaner: the real one's rounds, with
    the display above when ``enabled``; ``totals`` fills from ``round_done``. Use as a context
    manager around the command's rounds."""

    def __init__(self, executor, *, enabled: bool, waiting_text: str = "waiting for dirty partitions"):
        self.inner = executor
        self.name = getattr(executor, "name", "executor")
        self.enabled = enabled
        self.totals = CleanTotals()
        self.waiting_text = waiting_text
        self._bar = None
        self._task = None
        self._lock = threading.Lock()
        self._round_parts = 0
        self._round_done = 0

    def __getattr__(self, item):
        return getattr(self.inner, item)

    # -- life
    def __enter__(self) -> "CleanProgress":
        if self.enabled:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TimeElapsedColumn
            self._bar = Progress(TextColumn("{task.description}"), BarColumn(), DownloadColumn(binary_units=True),
                                 TextColumn("{task.fields[parts]}"), TimeElapsedColumn(),
                                 console=Console(stderr=True), transient=True)
            self._bar.start()
            self._task = self._bar.add_task("starting", total=None, parts="")
        return self

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None

    def _show(self, **fields) -> None:
        if self._bar is not None:
            self._bar.update(self._task, **fields)

    # -- a round
    def run(self, plans):
        if self._bar is None or not plans:
            return self.inner.run(plans)
        self._round_parts, self._round_done = len(plans), 0
        total = max(sum(plan_bytes(p) for p in plans), 1)
        self._bar.reset(self._task, total=total, completed=0, description="cleaning",
                        parts=f"0/{len(plans)} partitions")
        locals_ = _local_executors(self.inner)
        for ex in locals_:
            ex.progress = self
        result: dict = {}

        def work():
            try:
                result["r"] = self.inner.run(plans)
            except BaseException as e:      # re-raised on the command's thread
                result["e"] = e

        worker = threading.Thread(target=work, daemon=True, name="compactlog-clean")
        worker.start()
        try:
            while worker.is_alive():
                fraction = _spark_fraction(self.inner)
                if fraction is not None:
                    self._show(completed=int(fraction * total), description="cleaning on Spark",
                               parts=f"~{int(fraction * len(plans))}/{len(plans)} partitions")
                worker.join(0.2)
        finally:
            for ex in locals_:
                ex.progress = None
        if "e" in result:
            raise result["e"]
        self._show(completed=total, parts=f"{len(plans)}/{len(plans)} partitions")
        return result["r"]

    # told by InProcessExecutor, on the worker thread
    def task_started(self, plan) -> None:
        with self._lock:
            done = self._round_done
        self._show(description=f"cleaning {plan.topic}-{plan.partition}",
                   parts=f"{done}/{self._round_parts} partitions")

    def task_done(self, plan, result) -> None:
        with self._lock:
            self._round_done += 1
            done = self._round_done
        if self._bar is not None:
            self._bar.advance(self._task, plan_bytes(plan))
        self._show(parts=f"{done}/{self._round_parts} partitions")

    def round_done(self, outcomes) -> None:
        """A round ended (``CleanerService.on_outcomes``; ``clean`` calls it once)."""
        self.totals.add(outcomes)
        t = self.totals
        self._show(total=None, completed=t.bytes_read, description=f"round {t.rounds}: {self.waiting_text}",
                   parts=f"{t.cleaned} cleaned, {t.failed} failed so far")
