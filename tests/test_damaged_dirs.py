"""A data dir damaged in ways the corruption tests do not reach: odd names, files that are not
regular files, a torn tail in a closed segment. Every read command answers with a clear error or
a note (never an internal error, never a hang), exits as the contract says, and changes nothing."""

from __future__ import annotations

import hashlib
import os
import signal
import stat

import pytest

from cli_support import run_in_process

TOPIC = "t"


def run(data, *args, stdin: str | None = None, timeout: int = 60):
    """``compactlog --data-dir DATA ARGS`` in this process; a hang fails the test (SIGALRM)."""
    def hung(*_):
        raise AssertionError(f"compactlog {' '.join(args)} hung for {timeout} s")
    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(timeout)
    try:
        return run_in_process(["--data-dir", str(data), *args], stdin=stdin, text=True)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


def tree(root) -> dict:
    """Every name under root with its type, and size, digest and mtime for regular files (lstat:
    a FIFO is not opened, a symlink not followed)."""
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            key = os.path.relpath(p, root)
            if n == ".lock":
                out[key] = "lock"
            elif stat.S_ISREG(st.st_mode):
                with open(p, "rb") as f:
                    out[key] = (st.st_size, hashlib.sha256(f.read()).hexdigest(), st.st_mtime_ns)
            else:
                out[key] = (stat.S_IFMT(st.st_mode), 0 if stat.S_ISDIR(st.st_mode) else st.st_mtime_ns)
    return out


def make_dir(root, batches: int = 6) -> list[str]:
    """A topic of one partition whose segments roll every ~2 batches; the values consumed."""
    r = run(root, "topics", "create", "--topic", TOPIC, "--config", "segment.bytes=400")
    assert r.returncode == 0, r.stderr
    values = []
    for i in range(batches):
        lines = [f"v{i}-{j}" for j in range(4)]
        r = run(root, "produce", "--topic", TOPIC, stdin="\n".join(lines) + "\n")
        assert r.returncode == 0, r.stderr
        values += lines
    return values


def segments(root) -> list[str]:
    pdir = os.path.join(root, f"{TOPIC}-0")
    return sorted(os.path.join(pdir, n) for n in os.listdir(pdir) if n.endswith(".log"))


READS = [
    ("verify",),
    ("consume", "--topic", TOPIC, "--from-beginning"),
    ("topics", "describe", "--json"),
    ("get-offsets",),
    ("log-dirs", "--describe"),
    ("cleaner", "status", "--json"),
    ("explain", "--topic", TOPIC),
    ("transactions", "describe-producers", "--topic", TOPIC, "--partition", "0"),
]


def check_reads(root, *, timeout: int = 60) -> dict:
    """Run every read command; none fails inside (exit 70) or changes the tree. Their results."""
    before = tree(root)
    results = {}
    for args in READS:
        r = run(root, *args, timeout=timeout)
        assert "internal error" not in r.stderr and "Traceback" not in r.stderr, (args, r.stderr)
        assert r.returncode in (0, 1), (args, r.returncode, r.stderr)
        results[args[0]] = r
    assert tree(root) == before, "a read command changed the data dir"
    return results


@pytest.mark.parametrize("name", ["\u00b2.log", "\u2460.log", "\u00b9\u00b2.snapshot", "\u00b2.index"])
def test_a_file_named_with_digits_int_does_not_read_is_no_internal_error(tmp_path, name):
    """str.isdigit() is true for '²' and '①' but int() refuses them: every command failed with
    'internal error: ValueError: invalid literal for int()'. Kafka's loader (Long.parseLong of the
    text before the first dot) does not take them for offsets either."""
    root = tmp_path / "d"
    values = make_dir(root)
    with open(os.path.join(root, f"{TOPIC}-0", name), "wb") as f:
        f.write(b"not a segment")
    results = check_reads(root)
    assert results["consume"].returncode == 0 and results["consume"].stdout.split() == values
    r = run_in_process(["dump-log", "--files", os.path.join(root, f"{TOPIC}-0")], text=True)
    assert r.returncode == 0 and "internal error" not in r.stderr, r.stderr


def test_a_partition_directory_named_with_such_digits_is_reported_not_an_internal_error(tmp_path):
    """``t-²`` was parsed as partition int('²'): ValueError, an internal error on every command."""
    root = tmp_path / "d"
    values = make_dir(root)
    os.mkdir(os.path.join(root, f"{TOPIC}-\u00b2"))
    results = check_reads(root)
    assert results["consume"].returncode == 0 and results["consume"].stdout.split() == values
    assert results["verify"].returncode == 1 and f"{TOPIC}-\u00b2" in results["verify"].stdout


def _fifo(path):
    os.mkfifo(path)


def _directory(path):
    os.mkdir(path)


def _dangling_symlink(path):
    os.symlink(os.path.join(os.path.dirname(path), "gone"), path)


@pytest.mark.parametrize("make", [_fifo, _directory, _dangling_symlink])
def test_a_name_of_a_segment_that_is_not_a_regular_file_is_not_a_segment(tmp_path, make):
    """Kafka's loader lists a partition's regular files only (File.isFile), as compactlog's own
    loader does (loader._files); the readers' listing took every name: a FIFO named
    00000000000000001000.log hung every read command (the open waits for a writer), a directory
    made them fail ('No such device', from mmap), a dangling symlink made them retry for 10 s and
    then say that a writer changed the log."""
    root = tmp_path / "d"
    values = make_dir(root)
    make(os.path.join(root, f"{TOPIC}-0", "00000000000000001000.log"))
    results = check_reads(root, timeout=30)
    assert results["consume"].returncode == 0 and results["consume"].stdout.split() == values, \
        results["consume"].stderr
    r = run_in_process(["dump-log", "--files", os.path.join(root, f"{TOPIC}-0")], text=True)
    assert r.returncode == 0 and "internal error" not in r.stderr, r.stderr


@pytest.mark.parametrize("rel", [
    f"{TOPIC}-0/00000000000000000000.index",
    f"{TOPIC}-0/00000000000000000000.timeindex",
    f"{TOPIC}-0/leader-epoch-checkpoint",
    "recovery-point-offset-checkpoint",
    "compactlog.topics.json",
    "snapshot",
])
def test_a_fifo_in_place_of_an_index_a_checkpoint_or_a_snapshot_is_an_error_not_a_hang(tmp_path, rel):
    """Opening a FIFO for reading blocks until a writer comes: verify, consume, cleaner status,
    transactions describe-producers hung on one in place of a .index, .timeindex, .snapshot,
    leader-epoch-checkpoint, recovery-point-offset-checkpoint or compactlog.topics.json. Each
    now says the path is not a regular file (or reads past it), exits 0 or 1, changes nothing."""
    root = tmp_path / "d"
    make_dir(root)
    if rel == "snapshot":
        pdir = os.path.join(root, f"{TOPIC}-0")
        rel = os.path.join(f"{TOPIC}-0", max(n for n in os.listdir(pdir) if n.endswith(".snapshot")))
    path = os.path.join(root, rel)
    os.remove(path)
    os.mkfifo(path)
    results = check_reads(root, timeout=30)
    for name, r in results.items():
        if r.returncode:
            assert path in r.stdout + r.stderr and "not a regular file (a FIFO)" in r.stdout + r.stderr, \
                (name, r.stdout, r.stderr)


def _batch_positions(path) -> list[int]:
    data = open(path, "rb").read()
    out, pos = [], 0
    while pos + 12 <= len(data):
        out.append(pos)
        pos += 12 + int.from_bytes(data[pos + 8:pos + 12], "big")
    return out


@pytest.mark.parametrize("cut", ["mid-batch", "mid-header"])
@pytest.mark.parametrize("shutdown", ["clean", "crash"])
def test_a_closed_segment_cut_short_is_reported_not_skipped(tmp_path, cut, shutdown):
    """A segment that is not the last one ends in an incomplete batch (a truncated copy, a torn
    block): consume printed the records before it, then went on at the next segment and exited 0
    without a word, the records of the cut batches silently missing. Kafka's reader stops at an
    incomplete batch at a file's end; here a closed segment has no write in flight, so the read
    stops there with an error that names the file and position (as for any other corrupt batch
    in flushed data), after the records before it."""
    root = tmp_path / "d"
    values = make_dir(root)
    segs = segments(root)
    assert len(segs) >= 2                              # the first is not the last
    first = segs[0]
    positions = _batch_positions(first)
    assert len(positions) >= 2
    at = positions[1]
    os.truncate(first, at + (40 if cut == "mid-batch" else 7))
    if shutdown == "crash":
        os.remove(os.path.join(root, ".kafka_cleanshutdown"))
    results = check_reads(root)
    r = results["consume"]
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stdout.split() == values[:4]             # the first batch, then the stop
    assert f"{first}, position {at}" in r.stderr, r.stderr
    assert results["verify"].returncode == 1 and f"{first}: position {at}" in results["verify"].stdout


def test_a_broker_answers_corrupt_message_past_a_closed_segment_cut_short(tmp_path):
    """The broker's Fetch went past the cut batches as a compaction gap: kcat printed offsets
    0-3 and then those of the next segment, the cut ones missing and nothing said. Now the fetch
    at the first cut offset answers CORRUPT_MESSAGE (as for any corrupt batch it cannot serve)
    and the broker's log names the file and position."""
    from broker_support import Broker, kcat
    root = tmp_path / "d"
    values = make_dir(root)
    first = segments(root)[0]
    at = _batch_positions(first)[1]
    os.truncate(first, at + 40)
    with Broker(root) as b:
        r = kcat("-b", b.bootstrap, "-C", "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-f", "%o %s\n",
                 timeout=60)
        out = r.stdout.decode()
        assert out.split("\n")[:4] == [f"{i} {v}" for i, v in enumerate(values[:4])], out
        assert f"4 {values[4]}" not in out and values[-1] not in out, out
        assert f"{first}, position {at}" in b.log_text()
        assert b.alive()


def test_a_broker_does_not_serve_a_batch_whose_crc_does_not_match(tmp_path):
    """consume and dump-log report the batch (file, position, CRC); kcat through the broker printed
    its records as good ones (offsets 4-7 here) and the broker's log said nothing: Kafka's
    zero-copy fetch sends them unchecked and leaves the CRC to the client, which librdkafka does
    not check by default. Now the fetch checks each batch found on disk once (``read_span``): the
    batches before it are served, the fetch at it answers CORRUPT_MESSAGE and the log names it."""
    from broker_support import Broker, kcat
    root = tmp_path / "d"
    values = make_dir(root)
    first = segments(root)[0]
    at = _batch_positions(first)[1]
    with open(first, "r+b") as f:
        f.seek(at + 17)
        f.write(b"\x00\x00\x00\x00")                   # the stored CRC
    r = run(root, "consume", "--topic", TOPIC, "--from-beginning")
    assert r.returncode == 1 and f"position {at}" in r.stderr and "crc" in r.stderr
    with Broker(root) as b:
        r = kcat("-b", b.bootstrap, "-C", "-t", TOPIC, "-p", "0", "-o", "beginning", "-e", "-f", "%o %s\n",
                 timeout=60)
        out = r.stdout.decode()
        assert out.split("\n")[:4] == [f"{i} {v}" for i, v in enumerate(values[:4])], out
        assert values[4] not in out, out
        assert f"{first}, position {at}" in b.log_text() and "CRC" in b.log_text()
        assert b.alive()


def test_a_zero_filled_txn_index_of_a_later_segment_fails_its_sanity_check_at_once(tmp_path):
    """A 1 GiB sparse .txnindex of zeros (31 million entries of version 0 whose last offset, 0,
    lies below the segment's base offset) was decoded into Python objects by every command that
    opened the partition before Kafka's sanity check ran on them: a clean that cleaned nothing
    took 29 s. The check runs on the raw entries first; each command takes seconds, not tens."""
    import time
    root = tmp_path / "d"
    values = make_dir(root)
    later = segments(root)[1]
    base = int(os.path.basename(later).split(".")[0])
    assert base > 0
    with open(later[:-len(".log")] + ".txnindex", "wb") as f:
        f.truncate(1 << 30)
    started = time.process_time()
    results = check_reads(root)
    assert results["consume"].stdout.split() == values
    r = run(root, "clean", "--topic", TOPIC)
    assert "internal error" not in r.stderr, r.stderr
    assert time.process_time() - started < 20, "the zero-filled index was decoded entry by entry"


def test_a_txn_index_entry_of_version_1_is_not_read_as_version_0(tmp_path):
    """The version is a 2-byte big-endian field; only its first byte was compared with 0, so an
    entry of version 1 (an unknown version, which Kafka refuses) was taken for a good entry."""
    from compactlog.errors import StorageError
    from compactlog.storage.txn_index import ENTRY, TransactionIndex
    path = str(tmp_path / "00000000000000000000.txnindex")
    with open(path, "wb") as f:
        f.write(ENTRY.pack(0, 7, 1, 2, 3) + ENTRY.pack(1, 7, 4, 5, 6))
    with pytest.raises(StorageError, match=f"position {ENTRY.size}: unexpected aborted transaction version 1"):
        TransactionIndex(path, 0).entries()


def test_a_segment_renamed_above_its_offsets_stops_the_read_where_its_records_would_be_skipped(tmp_path):
    """A segment's files renamed to a higher base offset (its batches now below its name): a read
    went on at each segment's base as past a compaction gap, so consume printed the records
    before it and exited 0, that segment's records missing without a word. Now the read stops
    there naming the file (verify reports it too)."""
    root = tmp_path / "d"
    values = make_dir(root)
    segs = segments(root)
    assert len(segs) >= 2
    last = segs[-1]
    base = int(os.path.basename(last).split(".")[0])
    for path in [p for p in os.listdir(os.path.dirname(last)) if p.startswith(os.path.basename(last)[:20])]:
        old = os.path.join(os.path.dirname(last), path)
        os.rename(old, old.replace(f"{base:020d}", f"{base + 1000:020d}"))
    results = check_reads(root)
    r = results["consume"]
    assert r.returncode == 1 and f"below the segment's base offset {base + 1000}" in r.stderr, r.stderr
    assert r.stdout.split() == values[:base], r.stdout
    assert results["verify"].returncode == 1


@pytest.mark.parametrize("clean_shutdown", [True, False])
def test_a_writer_keeps_and_reports_a_segment_renamed_above_its_offsets(tmp_path, clean_shutdown):
    """The broker's recovery truncated such a segment to nothing without a word (the scan before it
    found every batch valid, so the cut was taken for empty, and ``LogSegment.recover``'s relative
    range rule, Kafka's ``ensureOffsetInRange``, then cut them all); after a clean shutdown it was
    not looked at, its log end came out below its base and a consumer stalled. Now the segment is
    recovered in both cases, its bytes kept in ``.log.discarded`` and the cut said in the log."""
    from broker_support import Broker, kcat
    root = tmp_path / "d"
    values = make_dir(root)
    last = segments(root)[-1]
    base = int(os.path.basename(last).split(".")[0])
    with open(last, "rb") as f:
        original = f.read()
    pdir = os.path.dirname(last)
    for name in [n for n in os.listdir(pdir) if n.startswith(f"{base:020d}.")]:
        os.rename(os.path.join(pdir, name), os.path.join(pdir, name.replace(f"{base:020d}", f"{base + 1000:020d}")))
    if not clean_shutdown:
        os.remove(os.path.join(root, ".kafka_cleanshutdown"))
    moved = os.path.join(pdir, f"{base + 1000:020d}.log")
    with Broker(root) as b:
        r = kcat("-b", b.bootstrap, "-C", "-t", TOPIC, "-p", "0", "-o", "beginning", "-c", base, "-f", "%o %s\n",
                 timeout=60)
        assert r.stdout.decode().split("\n")[:base] == [f"{i} {v}" for i, v in enumerate(values[:base])]
        text = b.log_text()
        assert f"{moved}, position 0, {len(original)} bytes" in text and f"kept in {moved}.discarded" in text, text
    with open(moved + ".discarded", "rb") as f:
        assert f.read() == original
