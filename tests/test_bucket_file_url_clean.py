"""``clean --data-dir file:///DIR``: the local-directory store's bucket URL over a Kafka data dir.
The cleaned generation and its switch go beside DIR (``DIR.compactlog-<n>-<id>/``,
``DIR.compactlog-clean.json``, as README says of ``PREFIX``), never inside it: a directory inside
a log dir whose name is not ``<topic>-<partition>`` stops a Kafka broker from starting on it (its
LogManager refuses it; compactlog's own ``verify`` says so). Real CLI runs, no S3 needed."""

from __future__ import annotations

import glob
import json
import os
import shutil

from cli_support import run_in_process
from test_bucket_data_dir import T0, make_data_dir

CLEAN = ("clean", "--now-ms", str(T0 + 10**9), "--roll", "--engine", "local")
CONSUME = ("consume", "--topic", "orders", "--from-beginning", "--property", "print.offset=true")


def test_clean_of_a_file_url_writes_beside_the_data_dir(tmp_path):
    root = str(tmp_path / "data")
    make_data_dir(root)
    reference = str(tmp_path / "reference")
    shutil.copytree(root, reference)
    before = sorted(os.listdir(root))
    r = run_in_process(["--data-dir", f"file://{root}", *CLEAN])
    assert r.returncode == 0, r.stderr.decode()
    assert sorted(os.listdir(root)) == before                   # the data dir as it was
    [generation] = glob.glob(root + ".compactlog-000001-*")
    # the command that takes it back is one for a local directory (aws s3 sync takes no file://)
    assert f"rsync -a --delete {generation}/ DATADIR/".encode() in r.stderr and b"aws s3" not in r.stderr
    switch = json.loads(open(root + ".compactlog-clean.json").read())
    assert switch["current"] == os.path.basename(generation) + "/"
    v = run_in_process(["--data-dir", root, "verify"])
    assert v.returncode == 0, v.stdout.decode() + v.stderr.decode()
    # readers of file://DIR follow the switch: what a local clean of the same input leaves
    assert run_in_process(["--data-dir", reference, *CLEAN]).returncode == 0
    got = run_in_process(["--data-dir", f"file://{root}", *CONSUME])
    want = run_in_process(["--data-dir", reference, *CONSUME])
    assert got.returncode == 0 and got.stdout == want.stdout and len(got.stdout.splitlines()) > 5
    # the generation is a data dir a broker can take as it is
    g = run_in_process(["--data-dir", generation, "verify"])
    assert g.returncode == 0, g.stdout.decode() + g.stderr.decode()
