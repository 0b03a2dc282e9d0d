"""The remote tier's kill points for crash tests: ``COMPACTLOG_TEST_REMOTE_KILL_FILE=path`` names a
file holding a step name; the code reaching that step removes the file and kills its own process
with SIGKILL (as ``kill -9`` would, between two writes). Steps: the copy's ``objects`` and
``manifest`` (manager.py), a compaction round's ``compaction-objects``, ``compaction-started``,
``compaction-manifest`` and ``compaction-deleted`` (compaction.py), ``compaction-segment-written``
(a cleaned remote segment written, not yet uploaded: source.py), ``bucket-clean-segment-written``,
``bucket-clean-objects`` and ``bucket-clean-switch`` (bucket_clean.py)."""

from __future__ import annotations

import os
import signal

KILL_FILE_ENV = "COMPACTLOG_TEST_REMOTE_KILL_FILE"


def maybe_die(step: str) -> None:
    path = os.environ.get(KILL_FILE_ENV)
    if not path:
        return
    try:
        with open(path) as f:
            wanted = f.read().strip()
    except OSError:
        return
    if wanted == step:
        os.remove(path)
        os.kill(os.getpid(), signal.SIGKILL)
