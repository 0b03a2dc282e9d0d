"""A progress bar on the terminal for long commands, and nothing anywhere else.

Shown only when stderr is a terminal (and, for commands that print data, stdout is not: a bar
would interleave with the records) and the work is big enough to be worth watching.
"""

from __future__ import annotations

import sys
from contextlib import contextmanager


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
