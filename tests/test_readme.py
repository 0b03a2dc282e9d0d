"""Every code block of README.md runs as written, in the README's order, against a broker this
module starts on a free loopback port.

Shell blocks run command by command through bash in a scratch directory (so the README's relative
paths, ``build/broker-data`` included, land there), with ``compactlog`` the CLI under test, found
where ``make venv`` puts it (``.venv/bin/compactlog``, relative to that directory) through the PATH
that the README's own ``export PATH=...`` step makes; each command must exit 0.
``127.0.0.1:9092`` becomes the broker's address, ``127.0.0.1:9644`` its HTTP listener's, and the
README's absolute paths become directories prepared here: ``/backup/kafka-logs`` a data dir
holding an ``orders`` topic (two partitions, keyed records), ``/copy/kafka-logs`` a copy of it,
``/data/archive`` an empty data dir. The README's ``serve`` line is the broker this module
started; commands that run until stopped (``cleaner run``, ``consume --follow``) must still be
running after a few seconds and stop
on ^C, as their comments say. Python blocks run in a subprocess, but the one that starts a Spark
session: it runs in this process, on the session the suite's Spark tests share
(``run_spark_block``). What some commands and blocks
print is checked too (``_check_outputs``, ``_check_python_output``). A block preceded by
``<!-- readme-test: skip (why) -->`` is skipped (used for what needs a cluster or builds the
project), a ``text`` block is a picture; the "Transactions" section's
blocks are run by ``test_readme_transactions.py``, the "Security: TLS and SASL" section's by
``test_readme_security.py`` and the "Access control (ACLs)" section's by ``test_readme_acls.py``
(their brokers need settings of their own), and are left out here; that the README's brokers can
run side by side, as a reader following it in order runs them, is checked here.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from broker_support import COMMAND, KCAT, Broker, free_port
from test_readme_acls import section_blocks as acls_blocks
from test_readme_security import section_blocks as security_blocks
from test_readme_transactions import section_blocks as transactions_blocks

pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.skipif(KCAT is None, reason="the README's examples use kcat (apt-get install kcat)")

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
BLOCK = re.compile(r"(?:^<!-- readme-test: (?P<mark>[^\n]*?) -->\n)?^```(?P<lang>\w*)\n(?P<code>.*?)^```", re.S | re.M)
ASSIGNMENT = re.compile(r"(?:export )?[A-Za-z_][A-Za-z0-9_]*=\S*")
LONG_RUNNING_S = 5            # a command that runs until stopped must still be up after this long
COMMAND_TIMEOUT_S = 300
STOP_TIMEOUT_S = 60


def readme_blocks() -> list[tuple[int, str, str, str | None]]:
    """(line, language, code, readme-test mark) of every block outside the sections run elsewhere."""
    text = open(README, encoding="utf-8").read()
    elsewhere = set(transactions_blocks()) | set(security_blocks()) | set(acls_blocks())
    out = []
    for m in BLOCK.finditer(text):
        if (m.group("lang"), m.group("code")) in elsewhere:
            continue
        out.append((text.count("\n", 0, m.start("code")) + 1, m.group("lang"), m.group("code"), m.group("mark")))
    return out


BLOCKS = readme_blocks()


def test_the_sections_with_brokers_of_their_own_are_run_elsewhere():
    text = open(README, encoding="utf-8").read()
    assert len(BLOCK.findall(text)) == (len(BLOCKS) + len(transactions_blocks()) + len(security_blocks())
                                        + len(acls_blocks()))
    assert len(transactions_blocks()) >= 4 and len(security_blocks()) >= 5


def readme_exports() -> list[str]:
    """The README's ``export NAME=...`` lines (its PATH step), in order: what the shell a reader
    runs the examples in has done."""
    return [c for _, lang, code, mark in BLOCKS if mark is None and lang in ("", "sh", "bash", "shell")
            for c in shell_commands(code) if c.startswith("export ") and ASSIGNMENT.fullmatch(c)]


def test_the_readme_puts_compactlog_on_path(world):
    """Its first block that runs (right after ``make demo``/``make test``) puts the checkout's
    ``.venv/bin``, where ``make venv`` installs the CLI, first on PATH."""
    first = next(code for _, lang, code, mark in BLOCKS if mark is None)
    assert any(c.startswith("export PATH=") for c in shell_commands(first)), first
    assert shutil.which("compactlog", path=world["env"]["PATH"]) == str(world["work"] / ".venv" / "bin" / "compactlog")


def test_the_readme_brokers_can_run_side_by_side():
    """Followed in order, the README starts three brokers and stops none (its Transactions section
    goes back to the first): the first one's (serve's defaults), the Security section's
    (server.properties) and the ACL section's (--override), each on addresses of its own."""
    from compactlog.storage.config import BROKER_CONFIGS

    def addresses(settings: dict[str, str]) -> set[str]:
        listeners = settings.get("listeners", BROKER_CONFIGS["listeners"].default)
        return ({x.split("://", 1)[1] for x in listeners.split(",")}
                | {settings.get("metrics.listener", BROKER_CONFIGS["metrics.listener"].default)})

    serves = [c for _, lang, code, mark in BLOCKS if mark is None for c in shell_commands(code)
              if is_serve(_words(c))]
    assert serves == ["compactlog --data-dir build/broker-data serve            # PLAINTEXT://127.0.0.1:9092; "
                      "^C stops it cleanly"]
    first = addresses({})
    properties = security_blocks()[1][1]
    security = addresses(dict(line.split("=", 1) for line in properties.splitlines()
                              if re.match(r"(listeners|metrics\.listener)=", line)))
    acl_serve = next(c for c in shell_commands(acls_blocks()[0][1]) if c.endswith(" serve"))
    words = _words(acl_serve)
    acl = addresses(dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--override"))
    assert first == {"127.0.0.1:9092", "127.0.0.1:9644"}
    assert not first & security and not first & acl and not security & acl, (first, security, acl)
    transactions = "".join(code for _, code in transactions_blocks())
    assert set(re.findall(r"127\.0\.0\.1:\d+", transactions)) <= first


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The scratch directory, the broker, the prepared data dirs, and what to substitute."""
    work = tmp_path_factory.mktemp("readme")
    bin_dir = work / ".venv" / "bin"        # where `make venv` puts the CLI, relative to the checkout
    bin_dir.mkdir(parents=True)
    shim = bin_dir / "compactlog"          # the CLI of this checkout, whatever is installed
    shim.write_text("#!/bin/sh\nexec " + " ".join(f"'{w}'" for w in COMMAND) + ' "$@"\n')
    shim.chmod(0o755)
    # the PATH of a shell that ran the README's export lines in the checkout (here, the scratch dir)
    path = subprocess.run(["bash", "-c", "\n".join(readme_exports() + ['printf %s "$PATH"'])], cwd=work,
                          capture_output=True, text=True, check=True, timeout=COMMAND_TIMEOUT_S).stdout
    env = {**os.environ, "PATH": path}
    # the README's HTTP listener, 127.0.0.1:9644, on a port free here (a named one: `cleaner status
    # --bootstrap-server` reads it back from the broker's metrics.listener)
    metrics_address = f"127.0.0.1:{free_port()}"
    broker = Broker(work / "build" / "broker-data", {"metrics.listener": metrics_address}).start()
    try:
        backup, copy, archive = work / "backup-kafka-logs", work / "copy-kafka-logs", work / "archive"
        _cli(env, work, "--data-dir", backup, "topics", "create", "--topic", "orders", "--partitions", "2")
        now = int(time.time() * 1000)
        lines = "".join(f'{{"key": "order-{i % 7}", "value": "v{i}", "partition": {i % 2}, "timestamp": {now + i}}}\n'
                        for i in range(40))
        _cli(env, work, "--data-dir", backup, "produce", "--topic", "orders", "--input-format", "jsonl", stdin=lines)
        shutil.copytree(backup, copy)
        archive.mkdir()
        # what the README's Transactions section (run by its own module) leaves on the broker
        _cli(env, work, "topics", "create", "--bootstrap-server", broker.bootstrap, "--topic", "orders",
             "--partitions", "2")
        subs = {"127.0.0.1:9092": broker.bootstrap, "127.0.0.1:9644": metrics_address, "/backup/kafka-logs": str(backup),
                "/copy/kafka-logs": str(copy), "/data/archive": str(archive)}
        yield {"work": work, "env": env, "broker": broker, "subs": subs}
    finally:
        broker.stop()


def _cli(env, cwd, *args, stdin: str | None = None) -> str:
    r = subprocess.run(COMMAND + [str(a) for a in args], cwd=cwd, env=env, input=stdin, capture_output=True,
                       text=True, timeout=COMMAND_TIMEOUT_S)
    assert r.returncode == 0, f"{args}\n{r.stderr}"
    return r.stdout


def substituted(code: str, subs: dict[str, str]) -> str:
    for old, new in subs.items():
        code = code.replace(old, new)
    return code


def shell_commands(code: str) -> list[str]:
    """The commands of a shell block: continuation lines joined, blank lines left out."""
    out, pending = [], ""
    for line in code.splitlines():
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        command = (pending + line).strip()
        pending = ""
        if command and not command.startswith("#"):
            out.append(command)
    return out


def _words(command: str) -> list[str]:
    import shlex
    try:
        return shlex.split(command, comments=True)
    except ValueError:
        return command.split()


def is_serve(words: list[str]) -> bool:
    return words[:1] == ["compactlog"] and "serve" in words


def runs_until_stopped(words: list[str]) -> bool:
    if words[:1] != ["compactlog"]:
        return False
    return "--follow" in words or "-f" in words or any(words[i:i + 2] == ["cleaner", "run"] for i in range(len(words)))


def run_shell_block(code: str, world) -> dict[str, str]:
    """Each command of the block (assignments carried to the next ones); its stdout by command."""
    prelude, outputs = [], {}
    for command in shell_commands(substituted(code, world["subs"])):
        if ASSIGNMENT.fullmatch(command):
            prelude.append(command)
            continue
        words = _words(command)
        if is_serve(words):
            assert world["broker"].alive()          # the README's broker is the one started here
            continue
        script = "\n".join(prelude + ["set -o pipefail", command])
        if runs_until_stopped(words):
            _run_until_stopped(script, command, world)
            continue
        r = subprocess.run(["bash", "-c", script], cwd=world["work"], env=world["env"], capture_output=True,
                           text=True, timeout=COMMAND_TIMEOUT_S)
        assert r.returncode == 0, f"README command failed ({r.returncode}): {command}\n{r.stderr}"
        outputs[command] = r.stdout
    return outputs


def _as_from_a_terminal() -> None:
    """In the child before exec: SIGINT delivered and acted on, as for a command a user's shell starts
    (a disposition or mask the test worker's process carries is inherited through fork and exec,
    and a Python started with SIGINT ignored never installs its ^C handler)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})


def _run_until_stopped(script: str, command: str, world) -> None:
    proc = subprocess.Popen(["bash", "-c", script], cwd=world["work"], env=world["env"], stdout=subprocess.PIPE,
                            preexec_fn=_as_from_a_terminal,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        proc.wait(LONG_RUNNING_S)
        out, err = proc.communicate()
        assert proc.returncode == 0, f"README command ended with {proc.returncode}: {command}\n{err}"
        return
    except subprocess.TimeoutExpired:
        pass
    os.killpg(proc.pid, signal.SIGINT)             # ^C, as the README says
    try:
        out, err = proc.communicate(timeout=STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        # which of the group's processes did not stop (the command itself, or a child such as a
        # JVM holding the output pipes open), for the failure message
        left = subprocess.run(["ps", "-o", "pid,stat,etime,args", "-g", str(proc.pid)], capture_output=True,
                              text=True).stdout
        # the long-running commands print every thread's stack on SIGQUIT (as a JVM does): where
        # it was stuck goes into the failure message
        os.killpg(proc.pid, signal.SIGQUIT)
        time.sleep(1)
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        pytest.fail(f"README command did not stop on ^C within {STOP_TIMEOUT_S} s: {command}\n"
                    f"still running:\n{left}\nstderr:\n{err[-6000:]}")
    assert "Traceback" not in err and "internal error" not in err, f"{command}\n{err}"


def run_python_block(code: str, world) -> str:
    r = subprocess.run([sys.executable, "-c", substituted(code, world["subs"])], cwd=world["work"], env=world["env"],
                       capture_output=True, text=True, timeout=COMMAND_TIMEOUT_S * 2)
    assert r.returncode == 0, f"README Python block failed:\n{r.stderr[-4000:]}"
    return r.stdout


def uses_spark(code: str) -> bool:
    return "compactlog.spark.session()" in code


def run_spark_block(code: str, world, spark, monkeypatch) -> str:
    """A block that starts a Spark session runs in this worker, on the session the suite's other
    Spark tests share (``compactlog.spark.session()`` returns it: same master): in a process of
    its own it started a JVM and Python workers of its own, ~25 CPU-s (most not counted, the JVM
    outlived its reaper) and 40-110 s of this module's wall, to prove what the block's calls do,
    which is the same on any session. A fresh session with the default master is what the README's
    ``cleaner run`` and the Spark CLI tests start. The README's relative paths are made absolute
    under the scratch directory (the JVM's working directory is the worker's), and the streaming
    query the block leaves running is stopped after it."""
    import contextlib
    import io
    code = substituted(code, world["subs"]).replace('"build/', f'"{world["work"]}/build/')
    monkeypatch.setenv("COMPACTLOG_SPARK_MASTER", spark.sparkContext.master)
    out = io.StringIO()
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), {"__name__": "__readme__"})
    finally:
        for query in spark.streams.active:
            query.stop()
    return out.getvalue()


@pytest.mark.parametrize("line, lang, code, mark", BLOCKS, ids=[f"README-line-{b[0]}" for b in BLOCKS])
def test_readme_block_runs_as_written(world, line, lang, code, mark, request, monkeypatch):
    if mark is not None:
        if mark.startswith("skip"):
            pytest.skip(f"README line {line}: {mark}")
        pytest.fail(f"README line {line}: unknown readme-test mark {mark!r}")
    if lang == "text":
        return                  # a picture (a directory tree), not commands
    if lang == "python" and uses_spark(code):
        _check_python_output(code, run_spark_block(code, world, request.getfixturevalue("spark"), monkeypatch))
        return
    if lang == "python":
        _check_python_output(code, run_python_block(code, world))
        return
    assert lang in ("", "sh", "bash", "shell"), f"README line {line}: a {lang} block"
    outputs = run_shell_block(code, world)
    _check_outputs(outputs)


def test_commands_that_run_until_stopped_say_so():
    """A reader pastes the README's lines one by one: a command that does not return by itself
    (``serve``, ``cleaner run``, ``consume --follow``) says in its comment that ^C stops it."""
    for _, lang, code, mark in BLOCKS:
        for command in shell_commands(code) if mark is None and lang in ("", "sh", "bash", "shell") else ():
            words = _words(command)
            if is_serve(words) or runs_until_stopped(words):
                assert "^C" in command.partition("#")[2], command


def _check_python_output(code: str, out: str) -> None:
    """What some Python blocks print."""
    if '"enable.partition.eof": True' in code:      # the first one: the records, then each partition's end
        assert out.splitlines() == ["1 0 b'p3' b'10'", "1 1 b'p3' None"], out


def _check_outputs(outputs: dict[str, str]) -> None:
    """What some commands print, beyond their success (the console tools through the broker, the
    walkthrough of "Using it")."""
    for command, out in outputs.items():
        if "--topic payments --from-beginning --property print.key=true" in command:
            assert sorted(out.splitlines()) == ["alice\t25", "alice\t30", "bob\t12"], out
        elif "--group billing --from-beginning --max-messages 2" in command:
            assert len(out.splitlines()) == 2, out
        elif command.endswith("--group billing    # the rest: the group resumes"):
            assert len(out.splitlines()) == 1, out
        elif "--format '%p/%o %k=%s\\n'" in command:
            assert all(re.fullmatch(r"0/\d+ \w+=\d+", x) for x in out.splitlines()) and out, out
        elif "topics describe --bootstrap-server" in command:
            head = out.splitlines()[0]
            assert head.startswith("Topic: payments\tTopicId: ") and "\tPartitionCount: 2\tReplicationFactor: 1" in head
        elif "configs --bootstrap-server" in command and "--describe --entity-type topics" in command:
            assert out.splitlines()[0] == "Dynamic configs for topic payments are:"
            assert any(x.startswith("  cleanup.policy=compact,delete sensitive=false") for x in out.splitlines())
        elif command.startswith("compactlog cleaner status --bootstrap-server"):
            assert "prices-0" in out and "prices-2" in out and "max-dirty-percent" in out, out
        elif command.startswith("compactlog cleaner status --metrics-url"):
            rows = [json.loads(line) for line in out.splitlines()]
            assert {r["topic"] for r in rows[:-1]} >= {"prices", "__consumer_offsets"} and "maxDirtyPercent" in rows[-1]
        elif command.startswith("compactlog --version"):
            assert re.fullmatch(r"compactlog \S+\n", out), out
        elif "-t latest-product-price -e -o beginning -K:" in command:
            assert out.splitlines() == ["p3:10", "p5:7", "p3:11"], out     # the values as typed, no '$'
        elif "consume --topic prices --from-beginning --property print.key=true   # p3 10" in command:
            assert sorted(out.splitlines()) == ["p3\t10", "p3\t11", "p5\t7"], out
        elif "cleaner status" in command and "--data-dir $D" in command:
            assert "active segment" in out, out
        elif "explain --topic prices --partition 0 --roll" in command:
            assert "would remove 1 of 2 records" in out and "1 superseded" in out, out
        elif "clean --roll" in command and "--data-dir $D" in command:
            assert "1 of 3 records removed" in out.splitlines()[-1], out
        elif "consume --topic prices --from-beginning --property print.key=true   # now" in command:
            assert sorted(out.splitlines()) == ["p3\t11", "p5\t7"], out
        elif "get-offsets --topic-partitions 'prices:0-2'" in command:
            assert out.splitlines() == ["prices:0:2", "prices:1:1"], out      # p3 twice, p5 once
        elif command.startswith("compactlog metadata"):
            assert "(controller)" in out and 'topic "payments" with 2 partitions:' in out
