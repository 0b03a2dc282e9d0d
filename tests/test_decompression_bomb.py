"""A compressed batch can never inflate past what a batch can legally hold (issue 9, item 3).

The reproduction: a 32 KiB zstd batch with a valid CRC whose records section inflates to 1 GiB drove
consume, verify and dump-log to 2.3 GB of memory before they failed. Each command now fails at once
with one line naming the file, position, offset, codec and limit, in bounded memory: the peak RSS of
the command's process is measured and compared with the same command on the same directory without
the bomb (compactlog's imports alone take about 200 MB): a zstd bomb, refused from its block
headers, costs nothing; a gzip bomb (no size known upfront) at most the limit (64 MiB) and a step.
"""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys

import crc32c
import pytest

from compactlog.record import compression
from compactlog.storage.datadir import DataDir

T0 = 1_900_000_000_000
EXE = os.path.join(os.path.dirname(sys.executable), "compactlog")
LIMIT = compression.decompressed_limit(compression.DEFAULT_MAX_MESSAGE_BYTES)
SLACK_KB = 24 * 1024          # allocator and measurement noise between two runs of a command
RSS_BOUND_MB = 400            # the reproduction reached 2,300 MB

# runs one command and prints its exit code, peak RSS (KiB) and output as one JSON object
_MEASURE = """
import json, resource, subprocess, sys
p = subprocess.run(sys.argv[1:], capture_output=True, text=True)
print(json.dumps({"code": p.returncode, "out": p.stdout, "err": p.stderr,
                  "rss_kb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}))
"""


def zstd_rle_bomb(total: int = 1 << 30, block: int = 128 * 1024) -> bytes:
    n = total // block
    out = bytearray(b"\x28\xb5\x2f\xfd\x00\x38")
    for i in range(n):
        out += ((block << 3) | (1 << 1) | (1 if i == n - 1 else 0)).to_bytes(3, "little") + b"\x00"
    return bytes(out)


def bomb_batch(base_offset: int, section: bytes, codec: int = compression.ZSTD, count: int = 1000) -> bytes:
    """A v2 batch of ``count`` records whose records section is ``section``; its CRC is valid."""
    after = struct.pack(">hiqqqhii", codec, count - 1, T0, T0, -1, -1, -1, count) + section
    return struct.pack(">qiib", base_offset, 9 + len(after), 0, 2) + struct.pack(">I", crc32c.crc32c(after)) + after


def build(root: str, section: bytes | None, codec: int = compression.ZSTD) -> tuple[str, int, int]:
    """Topic t (compacted): two records, then the bomb (none when ``section`` is None); (segment path,
    bomb position, bomb offset)."""
    with DataDir(root, clock=lambda: T0, create=True, writable=True) as dd:
        dd.create_topic("t", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        log = dd.open_log("t", 0)
        log.append_records([b"a", b"b"], [b"1", b"2"])
        log.roll()
        log.append_records([b"c"], [b"3"])
        leo = log.log_end_offset
    seg = os.path.join(root, "t-0", f"{leo - 1:020d}.log")
    position = os.path.getsize(seg)
    if section is not None:
        with open(seg, "ab") as f:
            f.write(bomb_batch(leo, section, codec))
    return seg, position, leo


def assert_bounded(rss_kb: int, healthy_kb: int, allowed_kb: int) -> None:
    assert rss_kb < RSS_BOUND_MB * 1024, f"peak RSS {rss_kb // 1024} MB"
    assert rss_kb <= healthy_kb + allowed_kb + SLACK_KB, \
        f"peak RSS {rss_kb // 1024} MB, {healthy_kb // 1024} MB without the bomb"


def segment_files(root: str) -> dict:
    """The segments and indexes of t-0 (the loader may drop a stray producer snapshot, as Kafka's does)."""
    pdir = os.path.join(root, "t-0")
    return {n: open(os.path.join(pdir, n), "rb").read() for n in sorted(os.listdir(pdir))
            if not n.endswith(".snapshot")}


def run_measured(*args: str) -> dict:
    # compiled kernels in both runs: the healthy dir is small enough for plain-Python kernels, the
    # bomb's decompressed bytes are not, and numba's own ~100 MB would count as the bomb's
    env = {**os.environ, "COMPACTLOG_KERNELS": "jit"}
    p = subprocess.run([sys.executable, "-c", _MEASURE, EXE, *map(str, args)], capture_output=True, text=True,
                       timeout=300, env=env)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout)


COMMANDS = {
    "consume": lambda root, seg: ["--data-dir", root, "consume", "--topic", "t", "--from-beginning"],
    "verify": lambda root, seg: ["--data-dir", root, "verify"],
    "dump-log": lambda root, seg: ["--data-dir", root, "dump-log", "--files", seg, "--deep-iteration",
                                   "--print-data-log"],
}


@pytest.fixture(scope="module")
def healthy(tmp_path_factory):
    """A command's run over the same data dir without the bomb (its peak RSS the baseline),
    measured once a module: the zstd and the gzip tests of consume compare with the same one."""
    measured: dict = {}

    def measure(command: str) -> dict:
        if command not in measured:
            root = str(tmp_path_factory.mktemp("healthy") / "d")
            measured[command] = run_measured(*COMMANDS[command](root, build(root, None)[0]))
            assert measured[command]["code"] == 0, measured[command]["err"]
        return measured[command]
    return measure


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_zstd_bomb_fails_fast_in_bounded_memory(tmp_path, command, healthy):
    healthy = healthy(command)
    root = str(tmp_path / "d")
    seg, position, offset = build(root, zstd_rle_bomb())
    r = run_measured(*COMMANDS[command](root, seg))
    text = r["out"] + r["err"]
    if command != "dump-log":            # dump-log reports a batch it cannot decode inline, as Kafka's tool
        assert r["code"] != 0, text
    assert "Traceback" not in text
    lines = [ln for ln in text.splitlines() if "decompression limit" in ln]
    assert len(lines) == 1, text
    line = lines[0]
    assert f"position {position}" in line and f"offset {offset}" in line
    assert "zstd" in line and str(LIMIT) in line
    if command != "dump-log":            # dump-log names its one file at the top of its output
        assert seg in line
    assert_bounded(r["rss_kb"], healthy["rss_kb"], 0)


def test_gzip_bomb_is_cut_at_the_limit_in_bounded_memory(tmp_path, healthy):
    c = __import__("zlib").compressobj(9, 8, 31)
    section = b"".join(c.compress(bytes(1 << 20)) for _ in range(512)) + c.flush()   # 512 MiB of zeros
    healthy = healthy("consume")
    root = str(tmp_path / "d")
    seg, position, offset = build(root, section, compression.GZIP)
    r = run_measured("--data-dir", root, "consume", "--topic", "t", "--from-beginning")
    assert r["code"] != 0 and "Traceback" not in r["err"]
    assert f"{seg}, position {position}, offset {offset}" in r["err"] and "gzip" in r["err"]
    assert_bounded(r["rss_kb"], healthy["rss_kb"], LIMIT // 1024 * 9 // 8 + 8 * 1024)


def test_clean_refuses_the_partition_in_bounded_memory(tmp_path):
    root = str(tmp_path / "d")
    seg, position, offset = build(root, zstd_rle_bomb())
    with DataDir(root, clock=lambda: T0, writable=True) as dd:     # the bomb into the cleanable range
        dd.open_log("t", 0).roll()
    before = segment_files(root)
    r = run_measured("--data-dir", root, "clean", "--engine", "local", "--now-ms", T0, "--json")
    assert r["code"] != 0 and "Traceback" not in r["err"]
    out = json.loads(r["out"].splitlines()[0])
    assert not out["cleaned"]
    assert f"{seg}, position {position}, offset {offset}" in out["error"] and "decompression limit" in out["error"]
    assert segment_files(root) == before
    assert r["rss_kb"] < RSS_BOUND_MB * 1024, f"peak RSS {r['rss_kb'] // 1024} MB"
