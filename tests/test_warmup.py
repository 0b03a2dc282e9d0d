"""A fresh clone pays numba's compilation once, at install (`make venv` runs `python -m
compactlog.warmup`), and never in a command: the package is copied without any ``__pycache__``,
warmed up, and then `produce`, `consume`, `verify` and `clean` run with numba's cache debugging on: no
kernel is compiled (numba says "data saved to" when it compiles and caches one)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compactlog")


def fresh_copy(tmp_path) -> str:
    root = tmp_path / "clone"
    shutil.copytree(PACKAGE, root / "compactlog", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return str(root)


def run(root: str, *args, stdin: bytes | None = None, debug: bool = False) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": root, "COMPACTLOG_KERNELS": "jit"}   # compiled even on a small dir
    if debug:
        env["NUMBA_DEBUG_CACHE"] = "1"
    # run from the copy's parent: with `-m`, the working directory comes first on sys.path, and
    # from the checkout it would import the checkout's package (and its warm cache), not the copy
    return subprocess.run([sys.executable, *args], input=stdin, capture_output=True, env=env, timeout=900,
                          cwd=root)


def test_after_the_warm_up_no_command_compiles(tmp_path):
    root = fresh_copy(tmp_path)
    warm = run(root, "-m", "compactlog.warmup", "--quiet")
    assert warm.returncode == 0, warm.stderr.decode()[-2000:]
    data = str(tmp_path / "data")
    cli = ["-m", "compactlog.cli.main", "--data-dir", data]
    steps = [
        (["topics", "create", "--topic", "t", "--config", "cleanup.policy=compact"], None),
        (["produce", "--topic", "t", "--property", "parse.key=true"],
         b"".join(b"k%d\tv%d\n" % (i % 10, i) for i in range(100))),
        (["consume", "--topic", "t", "--from-beginning"], None),
        (["verify"], None),
        # the cleaner's kernels: the key estimate, the map (its prefetching probes), the rewrite
        (["clean", "--engine", "local", "--force", "--roll"], None),
    ]
    assert any(name.endswith(".nbi") for _, _, names in os.walk(os.path.join(root, "compactlog")) for name in names), \
        "the warm-up wrote no numba cache into the copy"
    for args, stdin in steps:
        r = run(root, *cli, *args, stdin=stdin, debug=True)
        assert r.returncode == 0, r.stderr.decode()[-2000:]
        # numba's cache debugging prints on stdout
        compiled = [line for line in (r.stdout + r.stderr).decode().splitlines() if "data saved to" in line]
        assert compiled == [], f"{args[0]} compiled: {compiled[:3]}"
