"""A fresh clone pays numba's compilation once, at install (`make venv` runs `python -m
compactlog.warmup`), and never in a command.

Compiling every kernel from scratch costs ~70 CPU-s, so the package is copied with the cache this
checkout already holds (`make venv` wrote it beside the sources), less one kernel module's cache
(``storage/index_check.py``: `verify` and `clean` run its kernels), and the warm-up's own steps run
with numba's cache debugging on, which names the cache file of every kernel signature it loads or
compiles. Then:
- the warm-up compiled that module's kernels again and wrote their cache into the copy (what it
  does for every kernel of a fresh clone);
- `produce`, `consume`, `verify` and `clean` run in fresh processes compile nothing (numba says
  "data saved to" when it compiles and caches one), and every cached kernel signature they load is
  one the warm-up loaded or compiled: on a fresh clone the warm-up would have compiled it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "compactlog")
# the kernel module whose cache the copy starts without: the warm-up must compile and cache it
RECOMPILED = os.path.join("storage", "index_check.py")

# the warm-up's steps (compactlog.warmup.warm_up, as `python -m compactlog.warmup` runs them) with
# numba's cache debugging on, and what its step processes print kept in a file: warm_up reads their
# stdout (its --check) but does not show it
_WARM_UP_SEEN = r"""
import subprocess, sys
from compactlog import warmup
seen = open(sys.argv[1], "wb")

class Seen(subprocess.Popen):
    def communicate(self, *args, **kwargs):
        out, err = super().communicate(*args, **kwargs)
        seen.write(out)
        return out, err

subprocess.Popen = Seen
warmup.warm_up(check=True)
seen.close()
"""

_CACHE_LINE = re.compile(r"\[cache\] data (loaded from|saved to) '([^']+)'")


def cache_events(text: str, root: str) -> tuple[set[str], set[str]]:
    """(loaded, saved): the cache data files numba's debugging names, relative to ``root``."""
    loaded, saved = set(), set()
    for what, path in _CACHE_LINE.findall(text):
        (loaded if what == "loaded from" else saved).add(os.path.relpath(path, root))
    return loaded, saved


def module_cache(root: str, module: str) -> list[str]:
    """The numba cache files (index and data) of ``module``'s kernels in the copy."""
    cache_dir = os.path.join(root, "compactlog", os.path.dirname(module), "__pycache__")
    stem = os.path.splitext(os.path.basename(module))[0] + "."
    if not os.path.isdir(cache_dir):
        return []
    return sorted(os.path.join(cache_dir, n) for n in os.listdir(cache_dir)
                  if n.startswith(stem) and n.endswith((".nbi", ".nbc")))


def copy_with_the_checkouts_cache(tmp_path) -> str:
    root = str(tmp_path / "clone")
    # copy2 keeps the sources' mtimes: the bytecode stays valid (numba's own key is the source's hash)
    shutil.copytree(PACKAGE, os.path.join(root, "compactlog"))
    for path in module_cache(root, RECOMPILED):
        os.remove(path)
    return root


def run(root: str, *args, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    # compiled even on a small dir; the cache debugging prints on stdout
    env = {**os.environ, "PYTHONPATH": root, "COMPACTLOG_KERNELS": "jit", "NUMBA_DEBUG_CACHE": "1"}
    # run from the copy's parent: with `-m`/`-c`, the working directory comes first on sys.path, and
    # from the checkout it would import the checkout's package (and its cache), not the copy
    return subprocess.run([sys.executable, *args], input=stdin, capture_output=True, env=env, timeout=900,
                          cwd=root)


def test_after_the_warm_up_no_command_compiles(tmp_path):
    root = copy_with_the_checkouts_cache(tmp_path)
    assert module_cache(root, RECOMPILED) == []
    seen = str(tmp_path / "warm-up.out")
    warm = run(root, "-c", _WARM_UP_SEEN, seen)
    assert warm.returncode == 0, warm.stderr.decode()[-2000:]
    with open(seen, encoding="utf-8", errors="replace") as f:
        warm_loaded, warm_saved = cache_events(f.read(), root)
    recompiled = module_cache(root, RECOMPILED)
    assert any(p.endswith(".nbc") for p in recompiled), "the warm-up wrote no numba cache for " + RECOMPILED
    assert {os.path.relpath(p, root) for p in recompiled if p.endswith(".nbc")} <= warm_saved
    warmed = warm_loaded | warm_saved
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
    used = set()
    for args, stdin in steps:
        r = run(root, *cli, *args, stdin=stdin)
        assert r.returncode == 0, r.stderr.decode()[-2000:]
        text = (r.stdout + r.stderr).decode("utf-8", "replace")
        loaded, saved = cache_events(text, root)
        assert saved == set(), f"{args[0]} compiled: {sorted(saved)[:3]}"
        assert loaded <= warmed, f"{args[0]} ran kernels the warm-up never compiled: {sorted(loaded - warmed)[:3]}"
        used |= loaded
    # the commands ran kernels (the check above is not empty), the recompiled module's among them
    assert any(p.startswith(os.path.join("compactlog", os.path.dirname(RECOMPILED))) and
               os.path.basename(p).startswith("index_check.") for p in used), sorted(used)[:10]
