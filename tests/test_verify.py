"""`compactlog verify` finds each injected fault, changes nothing, and passes Kafka's own output."""

from __future__ import annotations

import json
import os
import struct


from storage_support import tree_state
from compactlog.cli.main import main
from compactlog.storage.datadir import DataDir

T0 = 1_900_000_000_000


def build(path, compacted=True):
    dd = DataDir(str(path), clock=lambda: T0, create=True, writable=True)
    dd.create_topic("t", 1, {"cleanup.policy": "compact" if compacted else "delete",
                             "index.interval.bytes": "100"})
    log = dd.open_log("t", 0)
    for i in range(30):
        log.append_records([f"k{i % 7}".encode()], [f"value-{i}".encode() * 3])
    log.roll()
    log.append_records([b"last"], [b"x"])
    dd.close()
    return os.path.join(str(path), "t-0")


def run_verify(path, capsys, *extra):
    code = main(["--data-dir", str(path), "verify", *extra])
    return code, capsys.readouterr().out


def test_healthy_dir_passes_and_nothing_changes(tmp_path, capsys):
    build(tmp_path)
    before = tree_state(tmp_path)
    code, out = run_verify(tmp_path, capsys)
    assert code == 0, out
    assert "no problems" in out
    assert tree_state(tmp_path) == before


def test_flipped_bit_is_reported_with_file_and_position(tmp_path, capsys):
    pdir = build(tmp_path)
    log0 = os.path.join(pdir, "00000000000000000000.log")
    with open(log0, "r+b") as f:
        data = bytearray(f.read())
        second = 12 + struct.unpack_from(">i", data, 8)[0]   # start of the second batch
        data[second + 70] ^= 0x04
        f.seek(0)
        f.write(data)
    code, out = run_verify(tmp_path, capsys)
    assert code == 1
    assert f"{log0}: position {second}: batch 1-1 has an invalid CRC" in out


def test_truncated_batch_is_reported(tmp_path, capsys):
    pdir = build(tmp_path)
    log0 = os.path.join(pdir, "00000000000000000000.log")
    size = os.path.getsize(log0)
    os.truncate(log0, size - 9)
    code, out = run_verify(tmp_path, capsys, "--json")
    assert code == 1
    problems = [json.loads(x) for x in out.splitlines()][:-1]
    assert any(p["file"] == log0 and "not a complete batch" in p["problem"] for p in problems)


def test_stale_index_entry_is_reported(tmp_path, capsys):
    pdir = build(tmp_path)
    idx = os.path.join(pdir, "00000000000000000000.index")
    with open(idx, "ab") as f:
        f.write(struct.pack(">ii", 500, 99999))   # an offset and position the log does not have
    code, out = run_verify(tmp_path, capsys)
    assert code == 1
    assert idx in out and "offset 500, position 99999" in out


def test_duplicate_key_below_the_cleaner_checkpoint_is_reported(tmp_path, capsys):
    build(tmp_path)
    with DataDir(str(tmp_path), writable=True) as dd:
        dd.cleaner_checkpoint.update({("t", 0): 30})   # claims [0, 30) is clean, but it never was
    code, out = run_verify(tmp_path, capsys)
    assert code == 1
    assert "below the cleaner checkpoint 30 of a compacted partition" in out


def test_checkpoint_beyond_log_end_is_reported(tmp_path, capsys):
    build(tmp_path, compacted=False)
    with DataDir(str(tmp_path), writable=True) as dd:
        dd.cleaner_checkpoint.update({("t", 0): 1000})
    code, out = run_verify(tmp_path, capsys)
    assert code == 1 and "offset 1000 is outside the log" in out


def test_every_corpus_directory_verifies(corpus_dir, capsys):
    cases = os.path.join(corpus_dir, "cases")
    checked = 0
    for case in sorted(os.listdir(cases)):
        exp = os.path.join(cases, case, "expected")
        for d in [os.path.join(cases, case, "input")] + [os.path.join(exp, r) for r in sorted(os.listdir(exp))
                                                          if not r.endswith(".jsonl")]:
            code, out = run_verify(d, capsys)
            assert code == 0, f"{d}: {out}"
            checked += 1
    assert checked > 200
