"""Global options after the subcommand are moved before it; a subcommand's own option of the same
name, option values and everything after ``--`` stay where they are."""

from __future__ import annotations

import pytest

from .argv import hoist_global_options


@pytest.fixture(scope="module")
def root():
    import typer.main
    from .main import _register, app
    _register()
    return typer.main.get_command(app)


@pytest.mark.parametrize("args, expected", [
    (["consume", "--data-dir", "D", "--topic", "t"], ["--data-dir", "D", "consume", "--topic", "t"]),
    (["consume", "--topic", "t", "--data-dir=D"], ["--data-dir=D", "consume", "--topic", "t"]),
    (["topics", "create", "--topic", "t", "--override", "a=b", "-v"],
     ["--override", "a=b", "-v", "topics", "create", "--topic", "t"]),
    (["--data-dir", "D", "topics", "list", "--override", "x=1"],
     ["--data-dir", "D", "--override", "x=1", "topics", "list"]),
    # produce has its own --verbose: it stays produce's
    (["produce", "--topic", "t", "--verbose", "--data-dir", "D"],
     ["--data-dir", "D", "produce", "--topic", "t", "--verbose"]),
    # a value that looks like a global option is a value
    (["consume", "--topic", "--data-dir"], ["consume", "--topic", "--data-dir"]),
    (["consume", "--topic", "t", "--", "--data-dir", "D"], ["consume", "--topic", "t", "--", "--data-dir", "D"]),
    # a group's own options before its subcommand
    (["transactions", "--bootstrap-server", "h:1", "list", "--data-dir", "D"],
     ["--data-dir", "D", "transactions", "--bootstrap-server", "h:1", "list"]),
    (["--help"], ["--help"]),
    (["consume", "--help"], ["consume", "--help"]),
])
def test_hoisting(root, args, expected):
    assert hoist_global_options(root, args) == expected


@pytest.mark.parametrize("args, expected", [
    (["--data-dir", "D", "produce", "--topic", "t", "--property", "parse.key=true"],
     "compactlog produce --bootstrap-server h:1 --topic t --property parse.key=true"),
    (["--data-dir", "D", "topics", "create", "--topic", "a b"],
     "compactlog topics create --bootstrap-server h:1 --topic 'a b'"),
    (["--data-dir", "D", "clean", "--force"], None),
])
def test_through_broker(root, args, expected):
    from .argv import through_broker
    assert through_broker(root, args, "h:1") == expected
