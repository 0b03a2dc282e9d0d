"""The broker sits beside Spark, not on it: server/ imports nothing from spark/, and Spark is loaded
only when a Spark engine is chosen (``cleaner.engines`` registers it lazily)."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SERVER = os.path.join(ROOT, "compactlog", "server")


def spark_imports(path: str, package: str | None = None) -> list[str]:
    """The imports of compactlog's spark package in one file of server/ (at any level);
    ``package``: the file's package (by default, from where it lies)."""
    if package is None:
        package = ".".join(["compactlog", *os.path.dirname(os.path.relpath(path, os.path.join(ROOT, "compactlog")))
                            .split(os.sep)])
    package = package.split(".")
    found = []
    for node in ast.walk(ast.parse(open(path).read())):
        if isinstance(node, ast.ImportFrom):
            base = package[:len(package) - node.level + 1] if node.level else []
            target = ".".join([*base, *(node.module.split(".") if node.module else [])])
            names = [target] + [f"{target}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        found += [n for n in names if n == "compactlog.spark" or n.startswith("compactlog.spark.")]
    return found


def test_no_module_of_server_imports_spark():
    offenders = {}
    for folder, _, names in os.walk(SERVER):
        for name in names:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                if spark_imports(path):
                    offenders[os.path.relpath(path, ROOT)] = spark_imports(path)
    assert offenders == {}


def test_the_check_sees_relative_and_absolute_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from ...spark.executor import SparkExecutor\nimport compactlog.spark.session\n"
                     "from ...cleaner import engines\nfrom .. import spark_like\n")
    assert spark_imports(str(probe), "compactlog.server.apis") == [
        "compactlog.spark.executor", "compactlog.spark.executor.SparkExecutor", "compactlog.spark.session"]


@pytest.mark.slow     # a subprocess importing the broker
def test_the_broker_and_its_executors_load_no_spark_until_spark_is_chosen():
    code = ("import sys\n"
            "import compactlog.server.app, compactlog.server.background\n"
            "from compactlog.cleaner.engines import make_executor\n"
            "make_executor('local'); auto = make_executor('auto')\n"
            "print(sorted(m for m in sys.modules if m.startswith('compactlog.spark') or m.startswith('pyspark')))\n"
            "auto.spark_executor\n"
            "print('compactlog.spark.executor' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={**os.environ, "PYTHONPATH": ROOT})
    before, after = out.stdout.splitlines()
    assert before == "[]" and after == "True"
