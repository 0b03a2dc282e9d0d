"""The plain converter gives what typer's own (pydantic) gives, value for value, and hands every
value it does not handle (and every error) to typer's."""

from __future__ import annotations

import pytest
import typer
import typer.core
from typer.testing import CliRunner

from . import plain_params

plain_params.install()
pytestmark = pytest.mark.skipif(not hasattr(typer.core.build_runtime_param, "typer"),
                                reason="this typer converts without pydantic: nothing is installed")
SEEN = {}
app = typer.Typer()


@app.command()
def cmd(n: int = typer.Option(None, "--n"), s: str = typer.Option("d", "--s"), f: bool = typer.Option(False, "--f"),
        many: list[str] = typer.Option(None, "--m"), nums: list[int] = typer.Option(None, "--k"),
        x: float = typer.Option(None, "--x")):
    SEEN.update(n=n, s=s, f=f, many=many, nums=nums, x=x)


def run(*args):
    SEEN.clear()
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, dict(SEEN), r.output


def typers(monkeypatch, *args):
    """The same command line through typer's own converter."""
    import typer.core
    monkeypatch.setattr(typer.core, "build_runtime_param", typer.core.build_runtime_param.typer)
    return run(*args)


CASES = [(), ("--n", "12", "--s", "", "--f"), ("--n", "-0", "--m", "a", "--m", "b=c", "--k", "3", "--k", "+4"),
         ("--n", " 7 ", "--x", "1.5"), ("--n", "1_000"), ("--n", "007"), ("--n", "99999999999999999999999"),
         ("--n", "x"), ("--k", "1", "--k", "y"), ("--x", "1e3"), ("--s", "é")]


@pytest.mark.parametrize("args", CASES)
def test_as_typer_converts(monkeypatch, args):
    ours = run(*args)
    theirs = typers(monkeypatch, *args)
    assert ours == theirs
    assert [type(v) for v in ours[1].values()] == [type(v) for v in theirs[1].values()]


def test_errors_are_typers():
    code, _, out = run("--n", "x")
    assert code == 2 and "Input should be a valid integer" in out


def test_the_plain_kinds():
    from typer._coercion import resolve_type_descriptor
    from typer.models import OptionInfo
    assert plain_params._plain_kind(resolve_type_descriptor(list[int], OptionInfo())) == (int, True)
    assert plain_params._plain_kind(resolve_type_descriptor(str, OptionInfo())) == (str, False)
    assert plain_params._plain_kind(resolve_type_descriptor(int, OptionInfo(min=1))) == (None, False)
