"""A command line imports only the module that declares its command (``COMMAND_MODULES``), and
that table names every command's module."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .main import _ALL_MODULES, COMMAND_MODULES, _command_word


def test_the_table_names_the_module_of_every_command():
    import typer.main
    from .main import _register, app
    _register()
    root = typer.main.get_command(app)
    assert set(root.commands) == set(COMMAND_MODULES)
    assert set(_ALL_MODULES) == set(COMMAND_MODULES.values())
    for word, command in root.commands.items():
        subcommands = getattr(command, "commands", None)
        callbacks = [c.callback for c in subcommands.values()] if subcommands else [command.callback]
        for callback in callbacks:
            module = callback.__module__.removeprefix("compactlog.cli.")
            assert module.split(".")[0] == COMMAND_MODULES[word], (word, callback.__module__)


@pytest.mark.parametrize("args, word", [
    (["topics", "list"], "topics"),
    (["--data-dir", "D", "consume", "--topic", "t"], "consume"),
    (["--data-dir=D", "-v", "--override", "a=b", "clean"], "clean"),
    (["--help"], None),
    ([], None),
    (["--no-such-option", "consume"], None),
    (["--data-dir", "consume"], None),
])
def test_the_command_word(args, word):
    assert _command_word(args) == word


PROBE = """
import json, sys
from compactlog.cli.main import main
code = main(sys.argv[1:])
sys.stdout.flush()
print(json.dumps(sorted(m for m in sys.modules if m.startswith("compactlog.cli."))), file=sys.stderr)
"""


def _loaded(*args) -> set[str]:
    r = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60)
    return set(json.loads(r.stderr.strip().splitlines()[-1]))


@pytest.mark.slow       # two fresh processes
def test_a_command_imports_its_own_module_only(tmp_path):
    loaded = _loaded("--data-dir", str(tmp_path), "topics", "list")
    assert "compactlog.cli.topics" in loaded
    others = {f"compactlog.cli.{m}" for m in COMMAND_MODULES.values()} - {"compactlog.cli.topics"}
    assert not loaded & others, sorted(loaded & others)
    # without a command (or with one click does not know) every command is there for the help
    assert {f"compactlog.cli.{m}" for m in COMMAND_MODULES.values()} <= _loaded("--help")
