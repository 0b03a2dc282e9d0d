"""Commands over a bucket (``--data-dir s3://…``, a Kafka data dir copied there) against the same
commands over the same files local, in one run (a script, not a test).

    .venv/bin/python benchmarks/bucket_data_dir.py [--mb 32] [--keys 5000] [--segment-mb 4] [--baseline-rev REV]

One scratch data dir gets a compacted topic (1 KiB values over ``--keys`` keys, 2 partitions,
``--segment-mb`` segments); it is copied to ``moto_server`` (a child process on 127.0.0.1) as
``aws s3 sync`` would, and every command then reaches the bucket through a proxy that counts
requests. Each command runs as its own ``compactlog`` process, local then bucket: ``consume``
(every record, JSON lines to /dev/null), ``snapshot --engine local`` and ``clean --roll --engine
local`` (the bucket's clean writes a new generation and switches to it). Prints wall and CPU
seconds of both (CPU of the command's process, moto's excluded), their ratio, and the bucket's
requests by method and per GB of log, then one JSON line. ``clean`` also reports the peak local
disk its process held (the blocks allocated under its own ``TMPDIR``, sampled every 20 ms: the
scratch dir and temp files; the run log of a bucket's clean goes there too).

``--baseline-rev REV`` adds ``clean-baseline``: the same bucket clean by the code of git revision
REV (the package copied with its numba cache, the files that differ from REV taken from it, run by
``PYTHONPATH``), against a second copy of the bucket's data: before/after in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _s3_bench import child_cpu, moto_bucket  # noqa: E402


ROOT = os.path.dirname(HERE)


def allocated(top: str) -> int:
    """Bytes of disk held by the files under ``top`` (their allocated blocks)."""
    n = 0
    for d, _, names in os.walk(top):
        for name in names:
            try:
                n += os.lstat(os.path.join(d, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return n


def timed(cmd: list[str], env: dict, watch: str | None = None) -> tuple[float, float, int]:
    """(wall s, CPU s, peak bytes held under ``watch`` while it ran)."""
    peak = [0]
    done = threading.Event()

    def sample():
        while not done.wait(0.02):
            peak[0] = max(peak[0], allocated(watch))
    sampler = threading.Thread(target=sample, daemon=True) if watch else None
    if sampler:
        sampler.start()
    c0, t0 = child_cpu(), time.perf_counter()
    # run from / : ``python -m`` puts the working directory first on sys.path, ahead of PYTHONPATH
    p = subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd="/")
    secs, cpus = time.perf_counter() - t0, child_cpu() - c0
    done.set()
    if sampler:
        sampler.join()
    if p.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)}: exit {p.returncode}: {p.stderr.decode()[-500:]}")
    return secs, cpus, peak[0]


def baseline_tree(rev: str, dest: str) -> str:
    """The package as of ``rev`` under ``dest`` (for PYTHONPATH): this tree's copy (mtimes kept, so
    numba's cache of the unchanged kernels holds), each file that differs from ``rev`` replaced
    by its ``rev`` version (or removed)."""
    shutil.copytree(os.path.join(ROOT, "compactlog"), os.path.join(dest, "compactlog"))
    changed = subprocess.run(["git", "diff", "--name-only", rev, "--", "compactlog"], cwd=ROOT, check=True,
                             capture_output=True, text=True).stdout.split()
    for path in changed:
        old = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=ROOT, capture_output=True)
        target = os.path.join(dest, path)
        if old.returncode == 0:
            with open(target, "wb") as f:
                f.write(old.stdout)
        elif os.path.exists(target):
            os.remove(target)
    return dest


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=32)
    ap.add_argument("--keys", type=int, default=5000)
    ap.add_argument("--segment-mb", type=int, default=4)
    ap.add_argument("--baseline-rev", default=None, help="also run the bucket clean by this git revision's code")
    args = ap.parse_args()

    import compactlog.settings  # noqa: F401
    from compactlog.storage.config import BrokerConfig
    from compactlog.storage.datadir import DataDir
    from object_store import boto3_client
    from s3_support import ACCESS_KEY, REGION, SECRET_KEY

    with moto_bucket("bench") as (endpoint, proxy, _):
        client = boto3_client(endpoint)
        with tempfile.TemporaryDirectory() as tmp:
            root = os.path.join(tmp, "data")
            dd = DataDir(root, broker=BrokerConfig({}), create=True, writable=True)
            dd.create_topic("t", 2, {"cleanup.policy": "compact", "segment.bytes": str(args.segment_mb << 20),
                                     "min.cleanable.dirty.ratio": "0.01"})
            value = os.urandom(1000)
            for p in range(2):
                log = dd.open_log("t", p)
                for i in range(0, args.mb * 512, 500):
                    log.append_records([b"k%d" % (j % args.keys) for j in range(i, i + 500)], [value] * 500)
            dd.checkpoint_logs()
            dd.close()
            log_bytes = sum(os.path.getsize(os.path.join(d, n)) for d, _, ns in os.walk(root) for n in ns
                            if n.endswith(".log"))
            prefixes = ["dd"] + (["dd-base"] if args.baseline_rev else [])
            for d, _, names in os.walk(root):
                for n in names:
                    full = os.path.join(d, n)
                    for prefix in prefixes:
                        client.upload_file(full, "bench", f"{prefix}/" + os.path.relpath(full, root))
            env = dict(os.environ, AWS_ENDPOINT_URL=proxy.endpoint, AWS_ACCESS_KEY_ID=ACCESS_KEY,
                       AWS_SECRET_ACCESS_KEY=SECRET_KEY, AWS_REGION=REGION)
            exe = [sys.executable, "-m", "compactlog"]
            now = str(int(time.time() * 1000) + 10**9)
            work = {
                "consume": ["consume", "--topic", "t", "--from-beginning", "--output-format", "jsonl"],
                "snapshot": ["snapshot", "--topic", "t", "--format", "parquet", "--engine", "local", "--overwrite",
                             "--out"],
                "clean": ["clean", "--now-ms", now, "--roll", "--engine", "local"],
            }
            if args.baseline_rev:
                work["clean-baseline"] = work["clean"]
                base_env = dict(env, PYTHONPATH=baseline_tree(args.baseline_rev, os.path.join(tmp, "baseline")))
            results = {}
            for name, cmd in work.items():
                row = {}
                for where in ("local", "bucket"):
                    data = root if where == "local" else "s3://bench/" + ("dd-base" if name == "clean-baseline" else "dd")
                    if name == "clean-baseline" and where == "local":
                        row[where] = results["clean"]["local"]      # the same local clean (already done)
                        continue
                    full = exe + ["--data-dir", data] + cmd
                    if name == "snapshot":
                        full.append(os.path.join(tmp, f"snap-{where}"))
                    proxy.log.clear()
                    scratch = os.path.join(tmp, f"tmp-{name}-{where}")
                    os.makedirs(scratch)
                    run_env = dict(base_env if name == "clean-baseline" else env, TMPDIR=scratch)
                    secs, cpus, peak = timed(full, run_env, scratch if name.startswith("clean") else None)
                    reqs: dict[str, int] = {}
                    for m, _, query in proxy.log:
                        m = "LIST" if m == "GET" and "list-type" in query else m
                        reqs[m] = reqs.get(m, 0) + 1
                    row[where] = {"seconds": round(secs, 2), "cpu_s": round(cpus, 2)}
                    if name.startswith("clean"):
                        row[where]["peak_local_mb"] = round(peak / 1e6, 2)
                    if where == "bucket":
                        row[where]["requests"] = reqs
                        row[where]["requests_per_gb"] = round(sum(reqs.values()) / (log_bytes / 1e9))
                row["wall_ratio"] = round(row["bucket"]["seconds"] / row["local"]["seconds"], 2)
                row["cpu_ratio"] = round(row["bucket"]["cpu_s"] / max(row["local"]["cpu_s"], 0.01), 2)
                results[name] = row
                b = row["bucket"]
                print(f"{name:8s} local {row['local']['seconds']:6.2f} s ({row['local']['cpu_s']:5.2f} CPU s)   "
                      f"bucket {b['seconds']:6.2f} s ({b['cpu_s']:5.2f} CPU s)   wall x{row['wall_ratio']}, "
                      f"CPU x{row['cpu_ratio']}, requests {b['requests']} = {b['requests_per_gb']:,} per GB of log"
                      + (f", peak local disk {b['peak_local_mb']} MB" if "peak_local_mb" in b else ""))
            print(json.dumps({"log_mb": round(log_bytes / 1e6, 1), **results}))
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
