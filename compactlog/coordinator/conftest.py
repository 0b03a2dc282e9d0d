"""What the group and the transaction coordinator's tests share: ``Clock``, the injected clock
both services run on (ms, set by the test)."""

from __future__ import annotations


class Clock:
    def __init__(self):
        self.now = 1_700_000_000_000

    def __call__(self):
        return self.now
