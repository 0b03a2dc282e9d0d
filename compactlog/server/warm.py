"""The numba kernels of the broker's request paths loaded at start, in a background thread.

A kernel's machine code comes from the cache ``make venv`` filled, but a process still pays for
importing numba and loading each kernel's code on its first call (0.5-1 s of CPU, several
seconds on a loaded machine); in a broker without this, that was the first client's produce
(issue 28). So the broker starts this thread before it loads its logs and opens its listeners:
it switches every kernel to its compiled form (``record/jit.py``) and runs the produce, marker,
coordinator-write and read paths once on a scratch data dir of its own (a temporary directory,
removed after by the thread itself), then says so (``jit.mark_warm``): from then on a small produce may be answered
on the event loop (``apis/produce.quick_produce``), which must never wait for numba. Requests
that arrive meanwhile are served from the worker threads as before; a kernel they call waits at
most for the part of the warm-up still running.

A broker asked to stop meanwhile stops the warm-up between two steps and waits for it to remove
its scratch directory (``KernelWarmUp.stop``): the directory is the thread's, never an exit hook's.
An exit hook removing it (``tempfile.TemporaryDirectory``'s finalizer) raced the still-running
thread's appends at interpreter exit and printed a traceback ("Directory not empty") into the
log of a broker stopped right after its start.

Kafka's broker has no such step (the JVM's JIT warms as it goes); Redpanda's has none either.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
import time

log = logging.getLogger("kafka.server.KafkaServer")


class Stopped(Exception):
    """The broker is stopping: the warm-up ends between two steps."""


def warm_kernels(stopping: threading.Event | None = None) -> None:
    """Run the broker's kernels once, compiled (their first calls load them from numba's cache);
    ``stopping`` set ends it early with ``Stopped`` (its scratch directory removed)."""
    def check() -> None:
        if stopping is not None and stopping.is_set():
            raise Stopped()

    from ..record import compression, jit
    from ..record.batch import BatchSpec, encode_batch
    from ..record.kernels import scan_headers
    from ..storage.datadir import DataDir
    check()
    scan_headers.dispatcher          # numba imported, every kernel of the process now compiled
    now = int(time.time() * 1000)
    tmp = tempfile.mkdtemp(prefix="compactlog-warm-")
    try:
        dd = DataDir(tmp, create=True, writable=True, command="warm-up")
        try:
            dd.create_topic("compacted", 1, {"cleanup.policy": "compact"})
            dd.create_topic("plain", 1, {})
            for topic in ("compacted", "plain"):
                lg = dd.open_log(topic, 0)
                for codec in (compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4,
                              compression.ZSTD):
                    check()
                    lg.append_as_leader(encode_batch(BatchSpec(base_offset=0, compression=codec),
                                                     [(i, now, b"k%d" % i, b"v%d" % i) for i in range(20)]))
                # an idempotent and a transactional batch, a marker, a coordinator's write
                lg.append_as_leader(encode_batch(BatchSpec(base_offset=0, producer_id=1, producer_epoch=0,
                                                           base_sequence=0), [(0, now, b"k", b"v")]))
                lg.append_as_leader(encode_batch(BatchSpec(base_offset=0, producer_id=2, producer_epoch=0,
                                                           base_sequence=0, transactional=True),
                                                 [(0, now, b"k", b"v")]))
                lg.append_control(commit=False, producer_id=2, producer_epoch=0)
                lg.append_records([b"key"], [b"value"], timestamps=[now])
                span = lg.read_span(3, 1 << 20, min_one_batch=True, max_offset=lg.log_end_offset)
                span.read()
                lg.collect_aborted_transactions(0, lg.log_end_offset)
        finally:
            dd.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    jit.mark_warm()


class KernelWarmUp:
    """The warm-up's thread; ``stop`` ends it between two steps and waits for it."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kernel-warm-up", daemon=True)

    def _run(self) -> None:
        began, cpu = time.monotonic(), time.thread_time()
        try:
            warm_kernels(self.stopping)
        except Stopped:
            return
        except Exception as e:      # a kernel that cannot load is the request's problem, as before
            log.warning(f"Loading the numba kernels at start failed ({type(e).__name__}: {e}); each loads "
                        f"on first use instead")
            return
        log.info(f"Loaded the numba kernels in {time.monotonic() - began:.2f} s "
                 f"({time.thread_time() - cpu:.2f} CPU s, in the background)")

    def stop(self) -> None:
        """Bounded by the step running: numba's import, or one append on a scratch log."""
        self.stopping.set()
        self.thread.join()


def start() -> KernelWarmUp | None:
    """Warm the kernels in a daemon thread (a failure is logged: the broker serves on, its
    produces all in worker threads); None when there is nothing to load (``COMPACTLOG_KERNELS=python``)."""
    from ..record import jit
    if jit.warm():
        return None
    w = KernelWarmUp()
    w.thread.start()
    return w
