"""Reading never writes: every read command on every corpus input, on a read-only mount (a bind
mount remounted ``ro``, where a single write fails with EROFS) or, where the test cannot mount,
on a ``chmod -R a-w`` copy; the tree is hashed before and after. (The Spark source and snapshot's
reading side use the same PartitionReader; tests/test_spark_datasource.py checks they change
nothing.)"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess

import pytest

from corpus_support import case_names
from storage_support import tree_state

CASES = case_names()


def _mount_read_only(src: str, dst: str) -> bool:
    os.makedirs(dst, exist_ok=True)
    try:
        subprocess.run(["mount", "--bind", src, dst], check=True, capture_output=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    r = subprocess.run(["mount", "-o", "remount,bind,ro", dst], capture_output=True, timeout=30)
    if r.returncode != 0:
        subprocess.run(["umount", dst], capture_output=True, timeout=30)
        return False
    return True


@pytest.fixture(scope="module")
def read_only_tree(corpus_dir, tmp_path_factory):
    root = str(tmp_path_factory.mktemp("ro"))
    src = os.path.join(root, "src")
    for name in CASES:
        shutil.copytree(os.path.join(corpus_dir, "cases", name, "input"), os.path.join(src, name))
    for dirpath, dirnames, filenames in os.walk(src):
        for n in filenames + dirnames:
            p = os.path.join(dirpath, n)
            os.chmod(p, stat.S_IMODE(os.stat(p).st_mode) & ~0o222)
    os.chmod(src, 0o555)
    mounted = os.path.join(root, "mnt")
    if _mount_read_only(src, mounted):
        yield mounted, "read-only mount"
        subprocess.run(["umount", mounted], capture_output=True, timeout=30)
    else:
        yield src, "chmod -R a-w copy"
    for dirpath, dirnames, filenames in os.walk(src):
        os.chmod(dirpath, 0o755)


def read_commands(case_dir: str, out_dir: str) -> list[list[str]]:
    pdir = os.path.join(case_dir, "topic-0")
    files = sorted(os.path.join(pdir, n) for n in os.listdir(pdir)
                   if n.endswith((".log", ".index", ".timeindex", ".txnindex", ".snapshot")))
    return [
        ["--data-dir", case_dir, "consume", "--topic", "topic", "--from-beginning", "--output-format", "jsonl"],
        ["--data-dir", case_dir, "consume", "--topic", "topic", "--from-beginning",
         "--isolation-level", "read_uncommitted", "--output-format", "jsonl"],
        ["--data-dir", case_dir, "verify"],
        ["--data-dir", case_dir, "explain", "--topic", "topic", "--partition", "0"],
        ["--data-dir", case_dir, "cleaner", "status", "--json"],
        ["--data-dir", case_dir, "topics", "list"],
        ["--data-dir", case_dir, "topics", "describe", "--json"],
        ["dump-log", "--print-data-log", "--json", "--files", ",".join(files)],
    ]


def test_every_read_command_on_every_corpus_input_changes_nothing(cli, read_only_tree, tmp_path):
    root, how = read_only_tree
    before = tree_state(root)
    failures = []
    for name in CASES:
        for args in read_commands(os.path.join(root, name), str(tmp_path)):
            r = cli(*args)
            command = " ".join(a for a in args if not a.startswith("/"))
            if "Traceback" in r.err or "internal error" in r.err:
                failures.append(f"{name}: {command}: {r.err.strip()}")
            # verify may find problems in Kafka's own inputs (exit 1), never anything else
            if r.code not in (0, 1) or (r.code == 1 and args[2] != "verify"):
                failures.append(f"{name}: {command}: exit {r.code}: {r.err.strip()[:300]}")
    assert not failures, f"on a {how}:\n" + "\n".join(failures[:20])
    assert tree_state(root) == before, f"a read command changed the {how}"
