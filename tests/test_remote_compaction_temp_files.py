"""A remote compaction killed -9 while it writes a cleaned segment leaves nothing on local disk.

Each cleaned remote segment is written to a temporary file (one segment, up to ``segment.bytes``:
1 GiB by default) before its upload; the file was named in $TMPDIR and removed after the upload,
so a kill -9 (an OOM kill, a Spark executor lost) between the two left it there for good, one per
kill, found by no sweep. The cleaned copy of a bucket data dir (``ObjectReplacement``) did the
same. Now the file is unlinked as soon as it is made (the upload reads it through its descriptor):
a kill leaves nothing. Real ``clean`` processes, killed at a step of storage/remote/faults: over a
tiered data dir (its remote tier on the local-directory store; test_offline_tiered_clean builds
it), and over a copied data dir in moto's S3 (test_bucket_data_dir)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from compactlog.storage.remote.faults import KILL_FILE_ENV
from s3_support import moto  # noqa: F401 - fixture
from test_bucket_data_dir import T0, env_for, make_data_dir, sync_up
from test_offline_tiered_clean import NOW, assert_consistent, build, clean, local_store_props, logical_batches

pytestmark = pytest.mark.slow

COMMAND = [sys.executable, "-m", "compactlog"]


def killed_run(args: list, step: str, tmp: str, env: dict | None = None) -> None:
    kill_file = tmp + ".kill"
    with open(kill_file, "w") as f:
        f.write(step)
    os.makedirs(tmp, exist_ok=True)
    env = dict(env or os.environ, **{KILL_FILE_ENV: kill_file, "TMPDIR": tmp})
    got = subprocess.run(COMMAND + args, capture_output=True, timeout=300, env=env)
    assert got.returncode == -9, got.stderr.decode()


def test_a_remote_round_killed_mid_segment_leaves_no_temp_file(tmp_path):
    tiered = build(str(tmp_path / "tiered"), local_store_props(str(tmp_path / "tiered")))
    tmp = str(tmp_path / "tmpdir")
    killed_run(["--data-dir", tiered, "clean", "--force", "--now-ms", str(NOW)], "compaction-segment-written", tmp)
    assert [n for n in os.listdir(tmp) if n.startswith("compactlog-")] == []
    before = logical_batches(tiered)
    clean(tiered, NOW)                      # the next run does the round
    assert logical_batches(tiered) != before
    assert_consistent(tiered)


def test_a_bucket_clean_killed_mid_segment_leaves_no_temp_file(moto, tmp_path):
    root = str(tmp_path / "data")
    make_data_dir(root)
    moto.create_bucket("temp-files")
    sync_up(moto.client(), root, "temp-files", "dd")
    tmp = str(tmp_path / "tmpdir")
    killed_run(["--data-dir", "s3://temp-files/dd", "clean", "--now-ms", str(T0 + 10**9), "--roll", "--engine",
                "local"], "bucket-clean-segment-written", tmp, env=env_for(moto))
    left = [n for n in os.listdir(tmp) if n.startswith("compactlog-cleaned-")]
    assert left == []
