"""The README's "Security: TLS and SASL" section runs as written, in a scratch directory, on free
ports (substituted for its ``127.0.0.1:9093`` and ``127.0.0.1:9645``; that they are not the other
brokers' is checked by test_readme.py): its ``openssl`` lines make the CA and the broker's key
store, ``compactlog users`` writes SCRAM users offline, the section's ``server.properties`` starts
the broker (its ``serve`` line, run in the background until the end), then ``users`` through the
broker with ``--command-config``, kcat with ``-X`` and ``-F``, and the confluent-kafka block, with
their outputs checked; the broker stops cleanly on SIGINT and its log holds no password."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

from broker_support import COMMAND, KCAT, free_port

pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.skipif(KCAT is None, reason="the section's examples use kcat (apt-get install kcat)")

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
HEADING = "### Security: TLS and SASL\n"
TIMEOUT_S = 120
PASSWORDS = ("alice-secret", "bob-secret")


def section_blocks() -> list[tuple[str, str]]:
    """(language, code) of each block of the README's security section."""
    text = open(README, encoding="utf-8").read()
    start = text.index(HEADING)
    end = text.index("\n### ", start + len(HEADING))
    return BLOCK.findall(text[start:end])


def _is_serve(line: str) -> bool:
    words = shlex.split(line, comments=True) if line.strip() else []
    return words[:1] == ["compactlog"] and words[-1:] == ["serve"]


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    work = tmp_path_factory.mktemp("readme-security")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "compactlog"          # the CLI of this checkout
    shim.write_text("#!/bin/sh\nexec " + " ".join(f"'{w}'" for w in COMMAND) + ' "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    subs = {"127.0.0.1:9093": f"127.0.0.1:{free_port()}", "127.0.0.1:9645": f"127.0.0.1:{free_port()}"}
    return {"work": work, "env": env, "subs": subs, "broker": None}


def substituted(code: str, subs: dict[str, str]) -> str:
    for old, new in subs.items():
        code = code.replace(old, new)
    return code


def run_script(code: str, scratch) -> str:
    r = subprocess.run(["bash", "-c", "set -euo pipefail\n" + code], cwd=scratch["work"], env=scratch["env"],
                       capture_output=True, text=True, timeout=TIMEOUT_S)
    assert r.returncode == 0, f"README block failed ({r.returncode}):\n{code}\n{r.stderr[-3000:]}"
    return r.stdout


def start_serve(line: str, scratch) -> subprocess.Popen:
    log = open(scratch["work"] / "broker.log", "w")
    proc = subprocess.Popen(["bash", "-c", "exec " + line], cwd=scratch["work"], env=scratch["env"],
                            stdout=log, stderr=log, stdin=subprocess.DEVNULL)
    scratch["broker"] = proc
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        text = broker_log(scratch)
        if "] started" in text:
            return proc
        assert proc.poll() is None, f"the README's broker exited with {proc.returncode}:\n{text}"
        time.sleep(0.1)
    pytest.fail(f"the README's broker did not start within 60 s:\n{broker_log(scratch)}")


def broker_log(scratch) -> str:
    with open(scratch["work"] / "broker.log", encoding="utf-8", errors="replace") as f:
        return f.read()


def run_block(code: str, scratch) -> str:
    """A shell block; a ``compactlog ... serve`` line in it starts the broker in the background
    (it runs until stopped) and the lines after it go on."""
    lines = substituted(code, scratch["subs"]).splitlines(keepends=True)
    out, pending = "", []
    for line in lines:
        if _is_serve(line):
            out += run_script("".join(pending), scratch) if pending else ""
            pending = []
            start_serve(line.strip(), scratch)
        else:
            pending.append(line)
    if "".join(pending).strip():
        out += run_script("".join(pending), scratch)
    return out


def test_the_security_section_runs_as_written(scratch):
    blocks = section_blocks()
    assert [lang for lang, _ in blocks] == ["", "", "", "", "python"]
    certificates, broker, users, kcat_lines, python = (code for _, code in blocks)
    try:
        run_block(certificates, scratch)
        assert "IP Address:127.0.0.1" in run_script("openssl x509 -in tls/broker.crt -noout -text", scratch)

        out = run_block(broker, scratch)                 # users offline, server.properties, serve
        assert "Completed updating config for user alice." in out
        log = broker_log(scratch)
        assert f"Listener SASL_SSL (SASL_SSL) on {scratch['subs']['127.0.0.1:9093']}" in log
        assert f"Metrics listener on http://{scratch['subs']['127.0.0.1:9645']}:" in log

        out = run_block(users, scratch)                  # through the broker, over SASL_SSL
        assert "Completed updating config for user bob." in out
        assert ("SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192, "
                "SCRAM-SHA-512=iterations=4096") in out
        assert "SCRAM credential configs for user-principal 'bob' are SCRAM-SHA-256=iterations=4096" in out

        out = run_block(kcat_lines, scratch)             # bob, SCRAM-SHA-256, with -X and with -F
        assert f"broker 0 at {scratch['subs']['127.0.0.1:9093']}" in out
        assert out.rstrip().splitlines()[-2:] == ["p1:20", "p2:30"]

        r = subprocess.run([sys.executable, "-c", substituted(python, scratch["subs"])], cwd=scratch["work"],
                           env=scratch["env"], capture_output=True, text=True, timeout=TIMEOUT_S)
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.strip() == "[(b'p1', b'20'), (b'p2', b'30'), (b'p3', b'10')]"
    finally:
        proc = scratch["broker"]
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            proc.wait(60)
    assert proc.returncode == 0
    log = broker_log(scratch)
    assert "shut down completed" in log and "Traceback" not in log
    for secret in PASSWORDS:
        assert secret not in log
    # the credential file holds salted credentials only
    stored = (scratch["work"] / "build" / "sasl-data" / "compactlog.scram-credentials.json").read_text()
    assert "alice" in stored and not any(secret in stored for secret in PASSWORDS)
