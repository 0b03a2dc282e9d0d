"""A progress bar on the terminal for long commands, and nothing anywhere else.

Shown only when stderr is a terminal (and, for commands that print data, stdout is not: a bar
would interleave with the records) and the work is big enough to be worth watching.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager

from ..storage import files


def partition_log_bytes(root: str, topic: str, partition: int) -> int:
    """The bytes of a partition's segment files (.log): a bar's total, from one directory listing."""
    pdir = os.path.join(root, files.partition_dir_name(topic, partition))
    try:
        return sum(e.stat().st_size for e in os.scandir(pdir) if e.name.endswith(files.LOG_SUFFIX))
    except OSError:
        return 0


class _NoBar:
    def advance(self, n: int = 1) -> None:
        pass


@contextmanager
def progress(label: str, total: int, *, unit: str = "", min_total: int = 1, data_on_stdout: bool = False):
    """``with progress("verifying", n) as bar: ... bar.advance(k)``."""
    if total < min_total or not sys.stderr.isatty() or (data_on_stdout and sys.stdout.isatty()):
        yield _NoBar()
        return
    from rich.console import Console
    from rich.progress import (BarColumn, DownloadColumn, MofNCompleteColumn, Progress, TextColumn,
                               TimeElapsedColumn, TimeRemainingColumn)
    amount = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
    with Progress(TextColumn(label), BarColumn(), amount, TimeElapsedColumn(), TimeRemainingColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(label, total=total)

        class _Bar:
            def advance(self, n: int = 1) -> None:
                bar.advance(task, n)
        yield _Bar()
