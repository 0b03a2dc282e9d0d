"""librdkafka's own test suite (its tests/ directory, built by hand) against ``compactlog serve``
(a script run on demand, not part of ``make test``).

One broker on 127.0.0.1 (a free port, a fresh data dir) per test, so that a test's groups and
topics never meet another's; ``test.conf`` names it with ``bootstrap.servers``;
``TEST_KAFKA_VERSION`` says which Kafka the tests may expect (the broker speaks Kafka 4's APIs)
and ``TEST_CONSUMER_GROUP_PROTOCOL`` (``consumer`` by default: KIP-848) is the group protocol
every consumer of the suite uses. Each test's verdict and the last lines of its output are
printed; the whole output is kept under ``--out``.

    # librdkafka's sources, built: ./configure && make -j2 && (cd tests && make -j2 build)
    .venv/bin/python benchmarks/librdkafka_suite.py --librdkafka /tmp/librdkafka [--tests 0018,0030]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))

from broker_support import Broker  # noqa: E402

# The suite's consumer-group tests that need a real broker (the mock-cluster ones, *_mock, do not
# talk to ours): subscribe, rebalance, commit, static members, regex, close.
GROUP_TESTS = ["0018", "0029", "0030", "0033", "0040", "0042", "0045", "0056", "0069", "0089", "0091",
               "0099", "0102", "0106", "0107", "0113", "0116", "0118", "0120", "0122", "0130", "0132",
               "0137", "0153"]

# trivup, the suite's own cluster, auto-creates topics of 4 partitions (tests produce to 0..3)
# tests of these numbers also run in the suite's noautocreate scenario (skipped in the default one)
NOAUTOCREATE = {"0045", "0107"}

BROKER = {"group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "true", "num.partitions": "4",
          "group.min.session.timeout.ms": "1000"}


def run_test(runner_dir: str, test: str, protocol: str, kafka_version: str, out_dir: str,
             timeout_s: int, scenario: str = "default") -> tuple[str, str]:
    """(verdict, tail of the output) of one test against a broker of its own, in one of the
    suite's scenarios (``noautocreate``: topics are not created by a Metadata request)."""
    root = tempfile.mkdtemp(prefix=f"rdk-{test}-")
    overrides = dict(BROKER)
    if scenario == "noautocreate":
        overrides["auto.create.topics.enable"] = "false"
    try:
        with Broker(os.path.join(root, "data"), overrides) as b:
            conf = os.path.join(root, "test.conf")
            with open(conf, "w") as f:
                f.write(f"bootstrap.servers={b.bootstrap}\ntest.timeout.multiplier=3\n")
            env = {**os.environ, "TESTS": test, "TEST_KAFKA_VERSION": kafka_version,
                   "TEST_CONSUMER_GROUP_PROTOCOL": protocol, "RDKAFKA_TEST_CONF": conf,
                   "LD_LIBRARY_PATH": ":".join([os.path.join(runner_dir, "..", "src"),
                                                os.path.join(runner_dir, "..", "src-cpp")])}
            started = time.monotonic()
            try:
                # line-buffered, so that a test killed at its timeout leaves its output
                line_buffered = ["stdbuf", "-oL", "-eL"] if shutil.which("stdbuf") else []
                r = subprocess.run(line_buffered + ["./test-runner", "-p1", "-E", "-s", scenario], cwd=runner_dir,
                                   env=env, capture_output=True, text=True, errors="replace", timeout=timeout_s)
                text, code = r.stdout + r.stderr, r.returncode
            except subprocess.TimeoutExpired as e:
                text = (e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
                code = None
            took = time.monotonic() - started
            broker_log = b.log_text()
        name = test if scenario == "default" else f"{test}-{scenario}"
        with open(os.path.join(out_dir, f"{name}.log"), "w") as f:
            f.write(text)
        with open(os.path.join(out_dir, f"{name}.broker.log"), "w") as f:
            f.write(broker_log)
        # the runner's summary table: one row per test (a number may name several: 0045_*)
        plain = re.sub(r"\x1b\[[0-9;]*m", "", text)
        rows = re.findall(r"^\|[ \t]*(\d{4}\w*)[ \t]*\|[ \t]*(PASSED|FAILED|SKIPPED)[ \t]*\|[^|\n]*\|"
                          r"[ \t]*([^|\n]*?)[ \t]*\|?[ \t]*$", plain, re.M)
        counts = {k: [n for n, v, _ in rows if v == k] for k in ("PASSED", "SKIPPED", "FAILED")}
        parts = [f"{len(counts['PASSED'])} passed"]
        if counts["SKIPPED"]:
            why = sorted({w for _, v, w in rows if v == "SKIPPED" and w})
            parts.append(f"{len(counts['SKIPPED'])} skipped ({', '.join(counts['SKIPPED'])}"
                         f"{': ' + '; '.join(why) if why else ''})")
        if counts["FAILED"]:
            parts.append(f"{len(counts['FAILED'])} FAILED ({', '.join(counts['FAILED'])})")
        if code is None:
            verdict = f"TIMEOUT after {timeout_s} s; " + ", ".join(parts)
        elif code == 0 and not counts["FAILED"]:
            verdict = ("PASSED" if counts["PASSED"] else "SKIPPED") + f" ({took:.0f} s): " + ", ".join(parts)
        else:
            verdict = f"FAILED ({took:.0f} s): " + ", ".join(parts)
        lines = [ln for ln in plain.splitlines() if re.search(r"failed at|FAIL|assert", ln)]
        return verdict, "\n".join(lines[-6:])
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--librdkafka", required=True, help="librdkafka's source tree, built with its tests")
    ap.add_argument("--tests", default=",".join(GROUP_TESTS), help="comma-separated test numbers")
    ap.add_argument("--protocol", default="consumer", choices=["consumer", "classic"])
    ap.add_argument("--kafka-version", default="4.0.0")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per test")
    ap.add_argument("--out", default=None, help="where each test's output is kept")
    args = ap.parse_args()
    runner_dir = os.path.join(args.librdkafka, "tests")
    if not os.access(os.path.join(runner_dir, "test-runner"), os.X_OK):
        sys.exit(f"no {runner_dir}/test-runner: build librdkafka's tests first "
                 f"(./configure && make && cd tests && make build)")
    out_dir = args.out or tempfile.mkdtemp(prefix="librdkafka-suite-")
    os.makedirs(out_dir, exist_ok=True)
    print(f"outputs in {out_dir}; TEST_CONSUMER_GROUP_PROTOCOL={args.protocol} "
          f"TEST_KAFKA_VERSION={args.kafka_version}", flush=True)
    for test in [t.strip() for t in args.tests.split(",") if t.strip()]:
        for scenario in ["default"] + (["noautocreate"] if test in NOAUTOCREATE else []):
            verdict, tail = run_test(runner_dir, test, args.protocol, args.kafka_version, out_dir, args.timeout,
                                     scenario)
            print(f"{test} ({scenario}): {verdict}", flush=True)
            if not verdict.startswith(("PASSED", "SKIPPED")) and tail:
                print("    " + tail.replace("\n", "\n    "), flush=True)


if __name__ == "__main__":
    main()
