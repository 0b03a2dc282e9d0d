"""Kafka's CleanerStats for one partition's round, plus compactlog's own counters."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field


@dataclass
class CleanerStats:
    bytes_read: int = 0
    bytes_written: int = 0
    messages_read: int = 0
    messages_written: int = 0
    map_bytes_read: int = 0
    map_messages_read: int = 0
    invalid_messages_read: int = 0
    map_keys: int = 0
    map_bytes: int = 0
    start_s: float = 0.0
    map_done_s: float = 0.0
    end_s: float = 0.0
    write_seconds: float = 0.0     # of the rewrite: writing and fsyncing the cleaned files
    removed: dict = field(default_factory=dict)   # reason -> records removed

    def count_removed(self, reason: str, n: int = 1) -> None:
        if n:
            self.removed[reason] = self.removed.get(reason, 0) + n

    @property
    def map_seconds(self) -> float:
        return max(self.map_done_s - self.start_s, 0.0)

    @property
    def clean_seconds(self) -> float:
        return max(self.end_s - self.map_done_s, 0.0)

    @property
    def elapsed_seconds(self) -> float:
        return max(self.end_s - self.start_s, 0.0)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["map_seconds"] = self.map_seconds
        d["clean_seconds"] = self.clean_seconds
        d["elapsed_seconds"] = self.elapsed_seconds
        return d

    @classmethod
    def from_dict(cls, d: dict) -> "CleanerStats":
        keys = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in keys})
