"""A corrupt partition is reported with its file and position and skipped; the others are cleaned,
and the long-running cleaner retries it only after log.cleaner.backoff.ms."""

from __future__ import annotations

import json
import os
import struct

import crc32c

from compactlog.cleaner.service import CleanerService
from compactlog.cleaner.executor import InProcessExecutor
from compactlog.cli.common import CliContext
from compactlog.storage.datadir import DataDir

T0 = 1_900_000_000_000


def build(path):
    with DataDir(str(path), clock=lambda: T0, create=True, writable=True) as dd:
        dd.create_topic("t", 2, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        for p in range(2):
            log = dd.open_log("t", p)
            for i in range(20):
                log.append_records([f"k{i % 3}".encode()], [b"v" * 20])
            log.roll()
            log.append_records([b"tail"], [b"x"])


def corrupt_record_length(path) -> tuple[str, int]:
    """Break the structure (not only the CRC) of the 5th batch of t-0's first segment."""
    seg = os.path.join(str(path), "t-0", "00000000000000000000.log")
    with open(seg, "r+b") as f:
        data = bytearray(f.read())
        pos = 0
        for _ in range(4):
            pos += 12 + struct.unpack_from(">i", data, pos + 8)[0]
        data[pos + 61] = 0x7E   # the first record's length varint: 63 bytes, more than the batch holds
        # with a matching CRC, so that the record decoder (not the CRC check) finds the fault
        size = 12 + struct.unpack_from(">i", data, pos + 8)[0]
        struct.pack_into(">I", data, pos + 17, crc32c.crc32c(bytes(data[pos + 21:pos + size])))
        f.seek(0)
        f.write(data)
    return seg, pos


def test_clean_reports_the_corrupt_partition_and_cleans_the_other(tmp_path, cli):
    build(tmp_path)
    seg, pos = corrupt_record_length(tmp_path)
    before = open(seg, "rb").read()
    r = cli("--data-dir", tmp_path, "clean", "--engine", "local", "--now-ms", T0, "--json")
    assert r.code == 1
    outs = {o["partition"]: o for o in map(json.loads, r.out.splitlines())}
    assert outs[1]["cleaned"] and outs[1]["messagesWritten"] == 3
    assert not outs[0]["cleaned"]
    # the file, the byte position of the broken record (inside the batch at ``pos``) and its batch's offset
    assert f"{seg}, position {pos + 61}, offset 4: records:" in outs[0]["error"]
    assert open(seg, "rb").read() == before, "the corrupt partition's data must not change"
    assert not [n for n in os.listdir(os.path.join(tmp_path, "t-0")) if n.endswith(".cleaned")]


def retry_times(service) -> dict:
    return {key: u.retry_at_ms for key, u in service.manager.uncleanable_partitions().items()}


def test_cleaner_run_retries_an_uncleanable_partition_after_the_backoff(tmp_path):
    build(tmp_path)
    corrupt_record_length(tmp_path)
    now = [T0]
    dd = CliContext(str(tmp_path), {"log.cleaner.backoff.ms": "15000"}).open(write=True)
    dd.clock = lambda: now[0]
    service = CleanerService(dd, InProcessExecutor(), clock=lambda: now[0])
    from compactlog.cleaner.log_format import CleanerLog
    log = CleanerLog(str(tmp_path))
    assert service.run_once(log)                       # t-1 cleaned, t-0 marked uncleanable
    assert retry_times(service) == {("t", 0): T0 + 15000}
    now[0] += 1000
    service.run_once(log)                              # within the backoff: t-0 not tried
    assert retry_times(service) == {("t", 0): T0 + 15000}
    now[0] = T0 + 15000
    service.run_once(log)                              # retried, fails again, new retry time
    assert retry_times(service) == {("t", 0): T0 + 30000}
    text = open(os.path.join(f"{tmp_path}.logs", "log-cleaner.log")).read()
    assert text.count("Marking its partition (t-0) as uncleanable") == 2
    dd.close()
