"""The numba kernels of the broker's request paths loaded at start, in a background thread.

A kernel's machine code comes from the cache ``make venv`` filled, but a process still pays for
importing numba and loading each kernel's code on its first call (0.5-1 s of CPU, several
seconds on a loaded machine); in a broker without this, that was the first client's produce
(issue 28). So the broker starts this thread before it loads its logs and opens its listeners:
it runs the produce, marker, coordinator-write and read paths once on a scratch data dir of its
own (a temporary directory, removed after by the thread itself), then says so
(``jit.mark_warm``): from then on a small produce may be answered on the event loop
(``apis/produce.quick_produce``). Requests that arrive meanwhile are served from the worker
threads as before; a kernel they call waits at most for the part of the warm-up still running.

Where ``make venv`` built the kernels ahead of time (``compactlog/aot.py``) the paths run on those
alone and numba is not imported at all, when they answered every call: a broker's start costs
~0.4 CPU-s less and its process holds no numba or LLVM (a test suite starts a few hundred brokers).
When they did not (a stale build, another CPU, a kernel or argument type the build lacks) the
warm-up loads numba and switches every kernel to its compiled form as before. Either way the
event loop itself never waits for numba (``jit.never_wait_for_numba_in_this_thread``: a kernel
call there without its machine code at hand runs in Python, its quick requests being small).

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


def warm_kernels(stopping: threading.Event | None = None) -> str:
    """Run the broker's kernel paths once so that none of them waits later, and say so
    (``jit.mark_warm``); ``stopping`` set ends it early with ``Stopped`` (its scratch directory
    removed). Where the ahead-of-time kernels are built (``compactlog/aot.py``) the paths run on them
    alone, numba never imported: when every kernel call was answered so, that is the warm-up
    ("ahead-of-time"). Otherwise, or when a call was not (a kernel or an argument type the build
    lacks), numba is loaded and the paths run compiled ("numba")."""
    def check() -> None:
        if stopping is not None and stopping.is_set():
            raise Stopped()

    from ..record import jit
    from ..record.kernels import scan_headers
    check()
    if jit.aot_ready():
        with jit.without_numba(record=True) as missed:
            _run_paths(check)
        if not missed:
            jit.mark_warm()
            return "ahead-of-time"
        log.info(f"The ahead-of-time kernels lack {', '.join(sorted(missed))}; loading numba")
    check()
    scan_headers.dispatcher          # numba imported, every kernel of the process now compiled
    _run_paths(check)
    jit.mark_warm()
    return "numba"


def _run_paths(check) -> None:
    """The produce, marker, coordinator-write and read paths once, on a scratch data dir."""
    from ..record import compression
    from ..record.batch import BatchSpec, encode_batch
    from ..storage.datadir import DataDir
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


class KernelWarmUp:
    """The warm-up's thread; ``stop`` ends it between two steps and waits for it."""

    def __init__(self) -> None:
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="kernel-warm-up", daemon=True)

    def _run(self) -> None:
        began, cpu = time.monotonic(), time.thread_time()
        try:
            how = warm_kernels(self.stopping)
        except Stopped:
            return
        except Exception as e:      # a kernel that cannot load is the request's problem, as before
            log.warning(f"Loading the numba kernels at start failed ({type(e).__name__}: {e}); each loads "
                        f"on first use instead")
            return
        what = "the ahead-of-time kernels (numba not loaded)" if how == "ahead-of-time" else "the numba kernels"
        log.info(f"Loaded {what} in {time.monotonic() - began:.2f} s "
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
