"""The cleaner's run log, in Kafka's log-cleaner.log format (log4j ``[time] LEVEL message (logger)``)."""

from __future__ import annotations

import datetime
import os


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
    """Appends to ``<data-dir>/logs/log-cleaner.log``."""

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, "logs", "log-cleaner.log")

    def _write(self, level: str, message: str) -> None:
        os.makedirs(os.path.dirname(self.path), exist_ok=True)
        now = datetime.datetime.now()
        stamp = now.strftime("%Y-%m-%d %H:%M:%S") + f",{now.microsecond // 1000:03d}"
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(f"[{stamp}] {level} [kafka-log-cleaner-thread-0]: {message} (kafka.log.LogCleaner)\n")

    def cleaned(self, o) -> None:
        self._write("INFO", "\n" + summary_text(o) + "\n")

    def error(self, o) -> None:
        self._write("WARN", f"Unexpected exception thrown when cleaning log {o.name}. Marking its partition "
                            f"({o.name}) as uncleanable: {o.error}")

    def info(self, message: str) -> None:
        self._write("INFO", message)
