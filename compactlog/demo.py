"""The seed walkthrough (``make demo``): a compacted topic, produced, consumed, cleaned on Spark.

Every step runs the real ``compactlog`` command and prints it first, so the output doubles as a
tutorial. The records are produced by one command each (each well over ``segment.ms=100`` after the
previous one), so each one rolls a new segment and everything but the last record becomes cleanable.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time

TOPIC = "latest-product-price"
SEED = ["p3:10$", "p5:7$", "p3:11$", "p6:25$", "p6:12$", "p5:14$", "p5:17$"]


def _exe() -> str:
    candidate = os.path.join(os.path.dirname(sys.executable), "compactlog")
    return candidate if os.path.exists(candidate) else "compactlog"


def run(data_dir: str, *args: str, stdin_lines: list[str] | None = None, delay: float = 0.0) -> str:
    cmd = [_exe(), "--data-dir", data_dir, *args]
    shown = " ".join(a if " " not in a else repr(a) for a in cmd[1:])
    print(f"\n$ compactlog {shown}", flush=True)
    if stdin_lines is None:
        p = subprocess.run(cmd, capture_output=True, text=True)
        out, err, code = p.stdout, p.stderr, p.returncode
    else:
        p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for line in stdin_lines:
            p.stdin.write(line + "\n")
            p.stdin.flush()
            time.sleep(delay)
        out, err = p.communicate()
        code = p.returncode
    sys.stdout.write(out)
    if code != 0:
        sys.stderr.write(err)
        raise SystemExit(f"demo step failed with exit code {code}")
    return out


def list_partition(data_dir: str, title: str) -> None:
    pdir = os.path.join(data_dir, f"{TOPIC}-0")
    print(f"\n{title}: {pdir}")
    for name in sorted(os.listdir(pdir)):
        if name.endswith(".log"):
            size = os.path.getsize(os.path.join(pdir, name))
            print(f"  {name}  {size:>5} bytes")
    print("  (segment files named by base offset; the last one is the active segment)")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data-dir", default="build/demo-data")
    ap.add_argument("--engine", default="spark", help="where the cleaner runs (spark, local)")
    args = ap.parse_args(argv)
    data_dir = os.path.abspath(args.data_dir)
    if os.path.exists(data_dir):
        shutil.rmtree(data_dir)
    os.makedirs(data_dir)
    run(data_dir, "topics", "create", "--topic", TOPIC, "--partitions", "1",
        "--config", "cleanup.policy=compact", "--config", "delete.retention.ms=100",
        "--config", "segment.ms=100", "--config", "min.cleanable.dirty.ratio=0.01")
    print(f"  (producing {' '.join(SEED)}, one produce command per record)")
    # one process per record: a single producer would read the lines that arrive during its own
    # start-up (~1 s) as one chunk with one timestamp, and only records > segment.ms apart roll
    for line in SEED:
        run(data_dir, "produce", "--topic", TOPIC, "--property", "parse.key=true",
            "--property", "key.separator=:", stdin_lines=[line])
    run(data_dir, "consume", "--topic", TOPIC, "--from-beginning", "--property", "print.key=true",
        "--property", "key.separator=:")
    list_partition(data_dir, "before cleaning")
    run(data_dir, "cleaner", "status")
    t0 = time.time()
    run(data_dir, "clean", "--engine", args.engine)
    print(f"  (the clean, including the Spark session start, took {time.time() - t0:.1f} s)")
    list_partition(data_dir, "after cleaning")
    print(f"\n$ cat {os.path.join(data_dir, 'cleaner-offset-checkpoint')}")
    with open(os.path.join(data_dir, "cleaner-offset-checkpoint")) as f:
        sys.stdout.write(f.read())
    out = run(data_dir, "consume", "--topic", TOPIC, "--from-beginning", "--property", "print.key=true",
              "--property", "key.separator=:")
    expected = ["p3:11$", "p6:12$", "p5:14$", "p5:17$"]
    if out.split() != expected:
        raise SystemExit(f"unexpected compacted content {out.split()}, expected {expected}")
    print("\nThe latest value of every key survives; p5:17$ is still in the active segment, which Kafka never "
          "cleans, so p5:14$ stays beside it.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
