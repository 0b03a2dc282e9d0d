"""What the object-store benchmarks share: an S3 API server on loopback (moto's, as the tests start
it) with one bucket, behind the tests' fault proxy (a benchmark ends by refusing the store, so a
broker still running cannot reach it), and the CPU clocks they report. Imported by
``bucket_data_dir.py``, ``remote_clean.py``, ``remote_offline_read.py`` and ``tiered_read.py``."""

from __future__ import annotations

import os
import resource
import sys
from contextlib import contextmanager

# the tests' S3 helpers (moto's server, the fault proxy) are the benchmarks' too
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests"))


def cpu() -> float:
    """CPU seconds of this process."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def child_cpu() -> float:
    """CPU seconds of this process's reaped children (the commands a benchmark ran)."""
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


@contextmanager
def moto_bucket(bucket: str):
    """(endpoint, proxy, moto): moto's server with ``bucket`` made, the fault proxy in front of it
    (``proxy.endpoint`` is what a broker is given), ``moto.properties(...)`` the store settings;
    the proxy refuses and the server stops on the way out."""
    from object_store import start_moto
    from s3_support import FaultProxy, MotoS3
    proc, endpoint = start_moto()
    try:
        proxy = FaultProxy(endpoint)
        moto = MotoS3.__new__(MotoS3)
        moto.endpoint = endpoint
        moto.create_bucket(bucket)
        try:
            yield endpoint, proxy, moto
        finally:
            proxy.refuse()
    finally:
        proc.terminate()
        proc.wait(10)
