"""kill -9 during a clean, many times: the directory must reopen equal to before or after the clean.

Usage: python tests/crash_harness.py [--trials N] [--seed S] [--work DIR]

A partition with many segments (several groups, transactions, tombstones) is cleaned once to learn
the "after" state. Then each trial copies the "before" directory, forks a child that cleans it and
is killed with SIGKILL either at its k-th file-system step (every rename, remove, fsync, truncate:
each step of the .cleaned -> .swap -> live protocol is hit) or after a random delay. The parent then
reopens the directory with the loader and checks: the partition's files equal the before or the
after state byte for byte, every batch's CRC is valid, every index is consistent with its log, and
the cleaner checkpoint is the old value or (only with the after state) the new one.
Exit status 0 when every trial passes.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import shutil
import signal
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from compactlog.cleaner.cleaner import Cleaner  # noqa: E402
from compactlog.cleaner.executor import InProcessExecutor  # noqa: E402
from compactlog.storage.datadir import DataDir  # noqa: E402
from compactlog.storage.loader import segment_is_valid  # noqa: E402

TOPIC = "crash"
NOW = 1_800_000_000_000
SEGMENT_FILES = (".log", ".index", ".timeindex", ".txnindex")


def build_before(path: str, seed: int) -> None:
    rng = random.Random(seed)
    clock = [NOW - 3_600_000]
    with DataDir(path, clock=lambda: clock[0], create=True, writable=True) as dd:
        dd.create_topic(TOPIC, 1, {"cleanup.policy": "compact", "segment.bytes": "8192",
                                   "index.interval.bytes": "512", "min.cleanable.dirty.ratio": "0.01",
                                   "delete.retention.ms": "1000"})
        log = dd.open_log(TOPIC, 0)
        for i in range(400):
            clock[0] += 10
            n = rng.randint(1, 6)
            keys = [f"k{rng.randint(0, 60)}".encode() for _ in range(n)]
            values = [None if rng.random() < 0.1 else os.urandom(rng.randint(5, 60)) for _ in range(n)]
            if i % 40 == 7:
                pid = 1000 + i
                log.append_records(keys, values, producer_id=pid, producer_epoch=0, base_sequence=0,
                                   transactional=True, timestamps=[clock[0]] * n)
                log.append_control(commit=(i % 80 != 7), producer_id=pid, producer_epoch=0)
            else:
                log.append_records(keys, values, timestamps=[clock[0]] * n)
        log.roll()


def partition_state(root: str) -> dict:
    pdir = os.path.join(root, f"{TOPIC}-0")
    state = {}
    for name in sorted(os.listdir(pdir)):
        if name.endswith(SEGMENT_FILES):
            with open(os.path.join(pdir, name), "rb") as f:
                data = f.read()
            if name.endswith(".txnindex") and not data:
                continue
            state[name] = hashlib.sha256(data).hexdigest()
    return state


def checkpoint(root: str) -> int | None:
    from compactlog.storage.checkpoint import OffsetCheckpointFile
    return OffsetCheckpointFile(os.path.join(root, "cleaner-offset-checkpoint")).read().get((TOPIC, 0))


def clean(root: str) -> None:
    with DataDir(root, clock=lambda: NOW, writable=True) as dd:
        outcomes = Cleaner(dd, InProcessExecutor()).run(NOW)
        assert outcomes[0].cleaned, outcomes[0].status.reason


class _CrashAt:
    """Counts file-system steps and SIGKILLs this process at the chosen one."""

    NAMES = ("replace", "rename", "remove", "unlink", "fsync", "ftruncate", "utime")

    def __init__(self, at: int):
        self.at = at
        self.count = 0
        for name in self.NAMES:
            setattr(os, name, self._wrap(getattr(os, name)))

    def _wrap(self, fn):
        def step(*args, **kwargs):
            self.count += 1
            if self.count == self.at:
                os.kill(os.getpid(), signal.SIGKILL)
            return fn(*args, **kwargs)
        return step


def count_steps(work: str, before: str) -> int:
    root = os.path.join(work, "count")
    shutil.copytree(before, root)
    pid = os.fork()
    if pid == 0:
        hook = _CrashAt(-1)
        try:
            clean(root)
        finally:
            with open(os.path.join(work, "steps"), "w") as f:
                f.write(str(hook.count))
            os._exit(0)
    os.waitpid(pid, 0)
    with open(os.path.join(work, "steps")) as f:
        n = int(f.read())
    shutil.rmtree(root)
    return n


def trial(work: str, before: str, *, crash_at: int | None, delay: float | None) -> str:
    root = os.path.join(work, "trial")
    if os.path.exists(root):
        shutil.rmtree(root)
    shutil.copytree(before, root)
    pid = os.fork()
    if pid == 0:
        try:
            if crash_at is not None:
                _CrashAt(crash_at)
            clean(root)
        finally:
            os._exit(0)
    if delay is not None:
        time.sleep(delay)
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    _, status = os.waitpid(pid, 0)
    killed = os.WIFSIGNALED(status)
    return ("killed" if killed else "finished"), root


def verify(root: str, before_state: dict, after_state: dict, old_ckpt, new_ckpt) -> str:
    with DataDir(root, clock=lambda: NOW, writable=True) as dd:
        log = dd.open_log(TOPIC, 0)
        for seg in log.segments:
            if not segment_is_valid(seg):
                raise AssertionError(f"segment {seg.base_offset} fails the CRC/index check after reopening")
        n = sum(1 for _ in log.records())
    state = partition_state(root)
    ckpt = checkpoint(root)
    if state == before_state:
        if ckpt != old_ckpt:
            raise AssertionError(f"before-state files but checkpoint {ckpt} (old {old_ckpt})")
        return f"before ({n} records)"
    if state == after_state:
        if ckpt not in (old_ckpt, new_ckpt):
            raise AssertionError(f"after-state files but checkpoint {ckpt}")
        return f"after ({n} records)"
    diff = sorted(set(state.items()) ^ set(after_state.items()))
    raise AssertionError(f"state is neither before nor after the clean: {diff[:6]}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--trials", type=int, default=60)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--work")
    ap.add_argument("--steps", type=int, default=0,
                    help="crash at this many file-system steps spread over the clean (0: every step)")
    args = ap.parse_args(argv)
    work = args.work or tempfile.mkdtemp(prefix="crash-")
    rng = random.Random(args.seed)
    before = os.path.join(work, "before")
    build_before(before, args.seed)
    old_ckpt = checkpoint(before)
    before_state = partition_state(before)
    after = os.path.join(work, "after")
    shutil.copytree(before, after)
    t0 = time.time()
    clean(after)
    clean_seconds = time.time() - t0
    after_state, new_ckpt = partition_state(after), checkpoint(after)
    # the "after" state a reopen sees: indexes as written, files as swapped in
    steps = count_steps(work, before)
    chosen = range(1, steps + 1)
    if args.steps and args.steps < steps:
        chosen = sorted({1 + round(i * (steps - 1) / (args.steps - 1)) for i in range(args.steps)})
    plan = [("step", k) for k in chosen]
    while len(plan) < args.trials:
        plan.append(("delay", rng.uniform(0, clean_seconds * 1.2)))
    failures = 0
    outcomes = {}
    for kind, value in plan:
        how, root = trial(work, before, crash_at=value if kind == "step" else None,
                          delay=value if kind == "delay" else None)
        try:
            result = verify(root, before_state, after_state, old_ckpt, new_ckpt)
            outcomes[result.split()[0]] = outcomes.get(result.split()[0], 0) + 1
            print(f"{kind}={value:.4g} {how}: {result}" if kind == "delay" else f"{kind}={value} {how}: {result}")
        except AssertionError as e:
            failures += 1
            print(f"{kind}={value} {how}: FAIL {e}")
    print(f"{len(plan)} trials ({steps} file-system steps, clean takes {clean_seconds:.3f}s): "
          f"{outcomes}, {failures} failures")
    if not args.work:
        shutil.rmtree(work)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
