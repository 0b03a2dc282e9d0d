"""What the storage layer removed or set aside, for the user to read: nothing goes in silence.

Kafka logs a recovery's truncation and a retention deletion at INFO in the broker's log, where few
users look. compactlog records each as a ``DataEvent`` on the log that did it; commands print them
(one line each, or JSON), and a command after which data was cut or quarantined ends with its own
exit code (``EXIT_DATA_SET_ASIDE``), so scripts notice.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

# retention deleted segments as configured: asked for, reported, exit code unchanged
RETENTION = "retention"
# recovery cut bytes that do not parse as batches (a torn write); they are kept in ``.discarded``
RECOVERY_CUT = "recovery-cut"
# recovery set a corrupt batch aside and kept every valid batch after it
QUARANTINE = "quarantine"
# recovery corrected a batch's base offset (outside the CRC) by the one byte that broke the order
REPAIRED = "repaired"
# a metadata file that could not be read was rebuilt from the log (nothing lost)
REBUILT = "rebuilt"
# a read-only open would cut, quarantine or repair (nothing changed: a writer's recovery will)
WOULD_CUT = "would-cut"
# a partition taken offline after a failed fsync or a write it could not undo (until a restart)
OFFLINE = "offline"
WOULD_REPAIR = "would-repair"

EXIT_DATA_SET_ASIDE = 3


@dataclass
class DataEvent:
    kind: str
    partition: str
    file: str
    reason: str
    position: int | None = None
    first_offset: int | None = None
    last_offset: int | None = None
    bytes: int = 0
    kept_at: str | None = None      # where the bytes went; None when deleted as asked

    @property
    def sets_data_aside(self) -> bool:
        """Data cut or quarantined by recovery (as opposed to deleted as configured)."""
        return self.kind in (RECOVERY_CUT, QUARANTINE, REPAIRED)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["event"] = d.pop("kind")
        return d

    def __str__(self) -> str:
        where = self.file + (f", position {self.position}" if self.position is not None else "")
        offsets = ""
        if self.first_offset is not None:
            offsets = (f", offsets {self.first_offset}-{self.last_offset}"
                       if self.last_offset is not None and self.last_offset != self.first_offset
                       else f", offset {self.first_offset}")
        size = f", {self.bytes} bytes" if self.bytes else ""
        went = f"; kept in {self.kept_at}" if self.kept_at else ""
        verb = {RETENTION: "deleted by retention", RECOVERY_CUT: "cut by recovery",
                QUARANTINE: "quarantined by recovery", REPAIRED: "repaired by recovery",
                REBUILT: "unreadable, rebuilt",
                WOULD_CUT: "not readable (a writer's recovery or `verify --repair` would set it aside)",
                WOULD_REPAIR: "needs repair (a writer's recovery or `verify --repair` would correct it)"}.get(self.kind, self.kind)
        return f"{self.partition}: {verb}: {where}{offsets}{size}: {self.reason}{went}"
