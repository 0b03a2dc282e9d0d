"""Compile and cache every numba kernel once, at install time: ``python -m compactlog.warmup``.

The kernels are ``@njit(cache=True)``: numba compiles one on first use for the argument types it
is called with and writes the machine code beside the sources (``__pycache__/*.nbi, *.nbc``),
where every later process loads it in milliseconds. Without this step the first command after an
install pays 20-40 s of compilation, and each kernel that a later command first uses pays again.
``make venv`` runs this module after ``pip install``.

It runs the commands users run on scratch data dirs, in two child processes side by side (the
two cores), each running its chain of steps in-process so that numba is loaded once per chain:
the broker's produce and fetch handlers in one; topics, produce (every codec, text and jsonl),
consume (text and jsonl, read_committed), explain, clean (in-process engine), verify, snapshot
(json) and dump-log in the other. So the kernels are compiled for exactly the argument types
those commands use. Spark's engine runs the same kernels in its Python workers, which share the
cache. ``--check`` runs the steps again and fails if any of them still compiles.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

_BROKER_SCRIPT = r"""
import datetime, sys, time
from compactlog.record.batch import BatchSpec, encode_batch
from compactlog.record import compression
from compactlog.server.apis.fetch import read_fetch, encode_result
from compactlog.server.apis.produce import handle_produce
from compactlog.server.dispatch import advertised_apis, dispatch_table
from compactlog.server.messages import build, nested
from compactlog.server.protocol import Request
from compactlog.server.state import BrokerState, Listener, ProducerIdManager, load_identity
from compactlog.server.versions import request_schema
from compactlog.storage.datadir import DataDir

dd = DataDir(sys.argv[1], writable=True, command="warm-up")
node, cluster = load_identity(dd.path, None)
state = BrokerState(dd, node, cluster, Listener("PLAINTEXT", "127.0.0.1", 9092),
                    producer_ids=ProducerIdManager(dd.path))
state.apis = advertised_apis(dispatch_table())
now = int(time.time() * 1000)
cls = request_schema(0, 9)
for codec in (compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD):
    for topic in ("compacted", "plain"):
        records = encode_batch(BatchSpec(base_offset=0, compression=codec),
                               [(i, now, b"k%d" % i, b"v%d" % i) for i in range(50)])
        body = build(cls, transactional_id=None, acks=-1, timeout=datetime.timedelta(seconds=5),
                     topic_data=(build(nested(cls, "TopicProduceData"), name=topic, partition_data=(
                         build(nested(cls, "PartitionProduceData"), index=0, records=records),)),))
        handle_produce(state, Request(0, 9, 1, "warm-up", None, body, 0, 9, True))
fcls = request_schema(1, 12)
for isolation in (0, 1):
    body = build(fcls, replica_id=-1, max_wait=datetime.timedelta(0), min_bytes=1, max_bytes=1 << 20,
                 isolation_level=isolation, session_id=0, session_epoch=-1, forgotten_topics_data=(),
                 rack_id="", cluster_id=None, topics=(build(nested(fcls, "FetchTopic"), topic="compacted",
                 partitions=(build(nested(fcls, "FetchPartition"), partition=0, fetch_offset=0,
                 partition_max_bytes=1 << 20, current_leader_epoch=-1, log_start_offset=-1,
                 last_fetched_epoch=-1),)),))
    read_fetch(state, body, 12, zero_copy_min=1 << 30).close()
dd.close()
"""


def _commands(data_dir: str, out_dir: str) -> list[tuple[list[str], bytes | None]]:
    keyed = b"".join(b"key-%d\tvalue-%d\n" % (i % 40, i) for i in range(400))
    jsonl = b"".join(b'{"key": "j%d", "value": "v%d"}\n' % (i % 7, i) for i in range(50))
    cmds: list[tuple[list[str], bytes | None]] = [
        (["topics", "create", "--topic", "compacted", "--partitions", "2", "--config", "cleanup.policy=compact",
          "--config", "min.cleanable.dirty.ratio=0.01", "--config", "segment.bytes=4096"], None),
        (["topics", "create", "--topic", "plain", "--partitions", "1"], None),
        # a KIP-280 topic: the version map and the header kernel (cleaner/strategy.py)
        (["topics", "create", "--topic", "versioned", "--config", "cleanup.policy=compact", "--config",
          "compaction.strategy=header", "--config", "compaction.strategy.header=v", "--config", "segment.bytes=4096"],
         None),
        (["produce", "--topic", "versioned", "--property", "parse.key=true"], keyed),
    ]
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        cmds.append((["produce", "--topic", "compacted", "--property", "parse.key=true",
                      "--compression-codec", codec], keyed))
        cmds.append((["produce", "--topic", "plain", "--compression-codec", codec, "--batch-size", "7"], keyed))
    cmds += [
        (["produce", "--topic", "compacted", "--input-format", "jsonl"], jsonl),
        (["consume", "--topic", "compacted", "--from-beginning"], None),
        (["consume", "--topic", "plain", "--from-beginning", "--output-format", "jsonl",
          "--isolation-level", "read_committed"], None),
        (["consume", "--topic", "compacted", "--partition", "0", "--offset", "5", "--max-messages", "3"], None),
        (["explain", "--topic", "compacted", "--partition", "0"], None),
        (["clean", "--engine", "local", "--force", "--roll"], None),
        (["verify"], None),
        (["snapshot", "--topic", "compacted", "--out", os.path.join(out_dir, "snap"), "--format", "json",
          "--engine", "local", "--overwrite"], None),
        (["consume", "--topic", "compacted", "--from-beginning"], None),
    ]
    return cmds


# one child process runs a chain of steps in-process (numba's import and its first cached-code load,
# ~0.8 s, paid once per chain instead of once per command); a line on stdout starts each step, so
# numba's cache debugging ("data saved to": a kernel was compiled) is told apart per step
_CHAIN = r"""
import io, json, sys, time
from compactlog.cli.main import main
with open(sys.argv[1]) as f:
    steps = json.load(f)
for i, (name, kind, payload, stdin) in enumerate(steps):
    print(f"\n@@warmup-step {i}", flush=True)
    started = time.monotonic()
    if kind == "python":
        sys.argv = ["warm-up", *stdin]
        exec(payload, {"__name__": "__warmup__"})
    else:
        sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode("latin-1")), encoding="utf-8")
        code = main(payload)
        if code:
            print(f"\n@@warmup-failed {i} exit {code}", flush=True)
            sys.exit(1)
    print(f"\n@@warmup-took {i} {time.monotonic() - started:.1f}", flush=True)
"""


def _chains(tmp: str) -> list[list[tuple[str, str, object, object]]]:
    """Two chains of (name, kind, payload, stdin), each on its own scratch data dir, run side by
    side: the broker's handlers, and the commands."""
    chains = []
    for n, with_broker in enumerate((True, False)):
        data_dir = os.path.join(tmp, f"data{n}")
        out_dir = os.path.join(tmp, f"out{n}")
        cli = [(c, s) for c, s in _commands(data_dir, out_dir)]
        steps = []
        for c, stdin in (cli[:2] if with_broker else cli):
            name = " ".join(a for a in c if not a.startswith("-") and a != data_dir)[:70]
            steps.append((name, "cli", ["--data-dir", data_dir, *c], stdin.decode("latin-1") if stdin else None))
        if with_broker:
            steps.append(("broker: Produce, Fetch", "python", _BROKER_SCRIPT, [data_dir]))
        else:
            dump = os.path.join(data_dir, "compacted-0")
            steps.append(("dump-log", "cli", ["dump-log", "--files", dump, "--print-data-log", "--deep-iteration"],
                          None))
        chains.append(steps)
    return chains


def warm_up(*, check: bool = False, verbose: bool = False) -> list[str]:
    """Run the steps (once more with ``check``, numba's cache debugging on); the steps that
    compiled a kernel on that pass."""
    # every kernel compiled, small as the scratch dir is (a command on a small dir runs its
    # kernels in plain Python until the work is worth numba: record/jit.py)
    env = {**os.environ, "COMPACTLOG_KERNELS": "jit"}
    if check:
        env["NUMBA_DEBUG_CACHE"] = "1"
    compiling = []
    with tempfile.TemporaryDirectory(prefix="compactlog-warmup-") as tmp:
        chains = _chains(tmp)
        procs = []
        for n, steps in enumerate(chains):
            path = os.path.join(tmp, f"chain{n}.json")
            with open(path, "w") as f:
                json.dump(steps, f)
            procs.append(subprocess.Popen([sys.executable, "-c", _CHAIN, path], stdout=subprocess.PIPE,
                                          stderr=subprocess.PIPE, env=env))
        for steps, proc in zip(chains, procs):
            out, err = proc.communicate()
            current, took = None, {}
            for line in out.decode("utf-8", "replace").splitlines():
                if line.startswith("@@warmup-step "):
                    current = int(line.split()[1])
                elif line.startswith("@@warmup-took "):
                    took[int(line.split()[1])] = line.split()[2]
                elif check and "data saved to" in line and current is not None:
                    if steps[current][0] not in compiling:
                        compiling.append(steps[current][0])
            if proc.returncode != 0:
                failed = steps[current][0] if current is not None else "start"
                raise RuntimeError(f"warm-up step failed ({failed}): exit {proc.returncode}\n"
                                   f"{err.decode('utf-8', 'replace')[-2000:]}")
            if verbose:
                for i, (name, *_rest) in enumerate(steps):
                    print(f"  {took.get(i, '?'):>5} s  {name}", file=sys.stderr)
    return compiling


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m compactlog.warmup", description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="fail if a command still compiles a kernel (run after a warm-up)")
    ap.add_argument("--quiet", action="store_true")
    args = ap.parse_args(argv)
    started = time.monotonic()
    if not args.quiet:
        print("compactlog: compiling the numba kernels once (cached beside the sources) ...", file=sys.stderr)
    compiling = warm_up(check=args.check, verbose=not args.quiet)
    if compiling:
        print("compactlog: these commands still compiled a kernel: " + "; ".join(compiling), file=sys.stderr)
        return 1
    if not args.quiet:
        print(f"compactlog: kernels ready ({time.monotonic() - started:.0f} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
