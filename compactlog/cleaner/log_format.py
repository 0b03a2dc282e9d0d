"""The cleaner's run log, in Kafka's log-cleaner.log format (log4j ``[time] LEVEL message (logger)``).

Kafka writes it to its own logs directory (``kafka.logs.dir``), never into a log dir: its loader
refuses a log dir holding any directory that is not ``<topic>-<partition>``. Here it goes to
``compactlog.cleaner.log.dir`` (or ``--log-dir``), by default ``<data dir>.logs`` next to the data
dir; never inside it. Versions before this one wrote ``<data dir>/logs/``: such a directory is left
where it is, and ``verify`` names it.
"""

from __future__ import annotations

import datetime
import os
import sys

from ..errors import ConfigError

LOG_DIR_SETTING = "compactlog.cleaner.log.dir"
FILE_NAME = "log-cleaner.log"
DEFAULT_SUFFIX = ".logs"        # <data dir>.logs, beside the data dir


def cleaner_log_dir(data_dir: str, broker=None, log_dir: str | None = None) -> str:
    """Where the run log goes: ``log_dir`` (``--log-dir``), else the broker setting, else next to
    the data dir. A directory inside the data dir is refused (Kafka would refuse the data dir);
    the data dir itself is allowed (Kafka's loader ignores files at its root)."""
    chosen = log_dir or (broker.get(LOG_DIR_SETTING) if broker is not None else "")
    data = os.path.realpath(data_dir)
    if not chosen:
        if os.path.dirname(data) == data:
            raise ConfigError(f"the data dir is {data}: set {LOG_DIR_SETTING} (or --log-dir) to say where the "
                              f"cleaner's run log goes")
        return data + DEFAULT_SUFFIX
    path = os.path.realpath(chosen)
    if path != data and os.path.commonpath([data, path]) == data:
        source = "--log-dir" if log_dir else LOG_DIR_SETTING
        raise ConfigError(f"{source} {chosen} is inside the data dir {data_dir}: Kafka's loader refuses a log dir "
                          f"holding a directory that is not <topic>-<partition>; choose a directory outside it "
                          f"(by default the run log goes to {data + DEFAULT_SUFFIX})")
    return path


def _mb(n: float) -> float:
    return n / (1024 * 1024)


def summary_text(o, thread: int = 0) -> str:
    """Kafka's per-round summary (LogCleaner.recordStats), for one partition."""
    s = o.stats
    elapsed = max(s.elapsed_seconds, 1e-9)
    index = s.map_seconds
    clean = max(elapsed - index, 1e-9)
    lines = [
        f"\tLog cleaner thread {thread} cleaned log {o.name} (dirty section = [{o.status.first_dirty}, {o.end_offset}])",
        f"\t{_mb(s.bytes_read):,.1f} MB of log processed in {elapsed:,.1f} seconds "
        f"({_mb(s.bytes_read / elapsed):,.1f} MB/sec).",
        f"\tIndexed {_mb(s.map_bytes_read):,.1f} MB in {index:.1f} seconds "
        f"({_mb(s.map_bytes_read) / max(index, 1e-9):,.1f} Mb/sec, {100 * index / elapsed:.1f}% of total time)",
        f"\tKey map: {s.map_keys:,d} keys, {o.map_kind or 'task'} map"
        + (f" ({o.map_reason})" if getattr(o, "map_reason", "") else ""),
        f"\tCleaned {_mb(s.bytes_read):,.1f} MB in {clean:.1f} seconds "
        f"({_mb(s.bytes_read) / clean:,.1f} Mb/sec, {100 * clean / elapsed:.1f}% of total time)",
        f"\tStart size: {_mb(s.bytes_read):,.1f} MB ({s.messages_read:,d} messages)",
        f"\tEnd size: {_mb(s.bytes_written):,.1f} MB ({s.messages_written:,d} messages)",
        f"\t{_pct(s.bytes_written, s.bytes_read):.1f}% size reduction "
        f"({_pct(s.messages_written, s.messages_read):.1f}% fewer messages)",
    ]
    if s.invalid_messages_read:
        lines.append(f"\tFound {s.invalid_messages_read} invalid messages during compaction.")
    return "\n".join(lines)


def _pct(after: int, before: int) -> float:
    return 100.0 * (1.0 - after / before) if before else 0.0


class CleanerLog:
    """Appends to ``log-cleaner.log`` in ``cleaner_log_dir``. A run log that cannot be written
    (a read-only parent directory) is said once on stderr and the cleaning goes on."""

    def __init__(self, data_dir: str, broker=None, log_dir: str | None = None):
        self.path = os.path.join(cleaner_log_dir(data_dir, broker, log_dir), FILE_NAME)
        self.failed = False

    @classmethod
    def for_datadir(cls, datadir, log_dir: str | None = None) -> "CleanerLog":
        return cls(datadir.path, datadir.broker, log_dir)

    def _write(self, level: str, message: str) -> None:
        if self.failed:
            return
        now = datetime.datetime.now()
        stamp = now.strftime("%Y-%m-%d %H:%M:%S") + f",{now.microsecond // 1000:03d}"
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(self.path, "a", encoding="utf-8") as f:
                f.write(f"[{stamp}] {level} [kafka-log-cleaner-thread-0]: {message} (kafka.log.LogCleaner)\n")
        except OSError as e:
            self.failed = True
            print(f"warning: the cleaner's run log cannot be written: {self.path}: {e.strerror or e}; set "
                  f"{LOG_DIR_SETTING} (or --log-dir) to a writable directory", file=sys.stderr)

    def cleaned(self, o) -> None:
        self._write("INFO", "\n" + summary_text(o) + "\n")

    def error(self, o) -> None:
        self._write("WARN", f"Unexpected exception thrown when cleaning log {o.name}. Marking its partition "
                            f"({o.name}) as uncleanable: {o.error}")

    def info(self, message: str) -> None:
        self._write("INFO", message)
