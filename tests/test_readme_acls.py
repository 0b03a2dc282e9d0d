"""The README's "Access control (ACLs)" section runs as written: its first block (topics, a record
and ACLs written offline into ``build/secure-data``, then the ``serve`` line) in a scratch
directory, the serve line being the broker this module starts with that line's overrides on free
ports (for ``127.0.0.1:9094`` and its HTTP listener's ``127.0.0.1:9646``); then the commands
through the broker and the Python block, with what they print checked. A command whose comment
says ``# refused: TEXT`` must fail with TEXT in its output, as the README says it does; every other
one must succeed."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys

import pytest

from broker_support import COMMAND, KCAT, Broker

pytest.importorskip("confluent_kafka")
pytestmark = pytest.mark.skipif(KCAT is None, reason="the section's examples use kcat (apt-get install kcat)")

README = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "README.md")
HEADING = "### Access control (ACLs)\n"
BLOCK = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
ADDRESS = "127.0.0.1:9094"
METRICS_ADDRESS = "127.0.0.1:9646"
TIMEOUT_S = 120


def section_blocks() -> list[tuple[str, str]]:
    """(language, code) of each block of the section (up to the next heading)."""
    text = open(README, encoding="utf-8").read()
    start = text.index(HEADING)
    ends = [i for i in (text.find("\n## ", start + 1), text.find("\n### ", start + 1)) if i != -1]
    return BLOCK.findall(text[start:min(ends)])


def commands(code: str) -> list[str]:
    """The block's commands, continuation lines joined."""
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


def run(commands_: list[str], work, env, address: str | None) -> dict[str, str]:
    """Each command through bash (``NAME=value`` lines carried to the next ones); its output."""
    prelude, outputs = [], {}
    for command in commands_:
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", command):
            prelude.append(command)
            continue
        script = "\n".join(prelude + ["set -o pipefail", command if address is None
                                      else command.replace(ADDRESS, address)])
        r = subprocess.run(["bash", "-c", script], cwd=work, env=env, capture_output=True, text=True,
                           timeout=TIMEOUT_S)
        refused = re.search(r"# refused: ([^(]+?)\s*(?:\(|$)", command)
        if refused:
            assert r.returncode != 0, f"README says refused, but it worked: {command}\n{r.stdout}"
            assert refused.group(1) in r.stdout + r.stderr, f"{command}\n{r.stdout}{r.stderr}"
            assert "Traceback" not in r.stderr
        else:
            assert r.returncode == 0, f"README command failed ({r.returncode}): {command}\n{r.stderr}"
        outputs[command] = r.stdout
    return outputs


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    work = tmp_path_factory.mktemp("readme-acls")
    bin_dir = work / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "compactlog"          # the CLI of this checkout, whatever is installed
    shim.write_text("#!/bin/sh\nexec " + " ".join(f"'{w}'" for w in COMMAND) + ' "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    return {"work": work, "env": env}


def test_the_acls_section_runs_as_written(world):
    blocks = section_blocks()
    assert [lang for lang, _ in blocks] == ["", "", "python"]
    work, env = world["work"], world["env"]

    # offline, before the first start; the serve line is the broker started here
    setup = commands(blocks[0][1])
    serve = [c for c in setup if c.endswith(" serve")]
    assert len(serve) == 1 and setup[-1] == serve[0]
    out = run(setup[:-1], work, env, None)
    match = next(v for k, v in out.items() if "--resource-pattern-type match" in k)
    assert "name=orders.audit, patternType=LITERAL" in match and "name=orders., patternType=PREFIXED" in match
    assert "operation=WRITE, permissionType=DENY" in match and "permissionType=ALLOW" in match
    words = shlex.split(serve[0])
    overrides = dict(words[i + 1].split("=", 1) for i, w in enumerate(words) if w == "--override")
    assert overrides.pop("listeners") == f"PLAINTEXT://{ADDRESS}"
    assert overrides.pop("metrics.listener") == METRICS_ADDRESS      # Broker's own: a free port
    data_dir = work / "build" / "secure-data"
    assert words[1:3] == ["--data-dir", "$D"] and (data_dir / "compactlog.acls.json").is_file()

    with Broker(data_dir, overrides) as broker:
        out = run(commands(blocks[1][1]), work, env, broker.bootstrap)
        listing = next(v for k, v in out.items() if k.startswith("kcat -b"))
        listed = set(re.findall(r'topic "([^"]+)"', listing))
        assert {"prices", "orders.eu", "orders.audit"} <= listed and "payroll" not in listed
        assert next(v for k, v in out.items() if k.startswith("kcat -C")).split() == ["p3:10"]
        acls = next(v for k, v in out.items() if "--list --principal User:ANONYMOUS" in k)
        assert acls.startswith("ACLs for principal `User:ANONYMOUS`\n")
        assert "resourceType=GROUP, name=dashboards" in acls and "resourceType=CLUSTER" in acls

        code = blocks[2][1].replace(ADDRESS, broker.bootstrap)
        r = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True,
                           timeout=TIMEOUT_S)
        assert r.returncode == 0, r.stderr[-4000:]
        assert r.stdout == "TOPIC_AUTHORIZATION_FAILED\nb'p3' b'10'\n"
        assert "Principal = User:ANONYMOUS is Denied operation = WRITE" in broker.log_text()
