"""``clean --spark-master spark://HOST:PORT``: the same pipeline on a Spark standalone cluster (a
master and a worker started from pyspark's own ``spark-class``, the executor a JVM of the worker's,
with Python workers of its own), over a Kafka data dir copied to a bucket no broker runs on. The
executors get nothing from the driver's environment: the bucket's settings travel with the tasks
(``ShadowDirSource``). The cleaned generation must read as the in-process clean of the same files."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time

import pytest

from s3_support import moto  # noqa: F401 - fixture
from test_bucket_data_dir import env_for, make_data_dir, sync_up

pytestmark = pytest.mark.slow

NOW = "1800000000000"
COMMAND = [sys.executable, "-m", "compactlog"]


def _spark_class() -> tuple[str, str]:
    import pyspark
    home = os.path.dirname(pyspark.__file__)
    return home, os.path.join(home, "bin", "spark-class")


def _start(args: list[str], log: str, ready: str, env: dict, timeout: float = 180) -> tuple[subprocess.Popen, str]:
    """A daemon of the cluster in a session of its own (its executors too), up when ``ready``
    shows in its log; the log's text."""
    out = open(log, "wb")
    proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(log, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        if ready in text:
            return proc, text
        if proc.poll() is not None:
            raise RuntimeError(f"{args[-1]} exited with {proc.returncode}:\n{text[-2000:]}")
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    raise RuntimeError(f"not ready within {timeout} s:\n{text[-2000:]}")


def _stop(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(30)
    except ProcessLookupError:
        pass


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """spark://127.0.0.1:PORT with one worker of one core, stopped (with its executors) by pid."""
    home, spark_class = _spark_class()
    work = tmp_path_factory.mktemp("spark-cluster")
    env = {**os.environ, "SPARK_HOME": home, "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_LOG_DIR": str(work)}
    master, text = _start([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                           "--port", "0", "--webui-port", "0"], str(work / "master.log"),
                          "Starting Spark master at", env)
    try:
        url = re.search(r"Starting Spark master at (spark://[0-9.]+:[0-9]+)", text).group(1)
        worker, _ = _start([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                            "--port", "0", "--webui-port", "0", "--cores", "1", "--memory", "1g",
                            "--work-dir", str(work / "work"), url], str(work / "worker.log"),
                           "Successfully registered with master", env)
        try:
            yield url, work
        finally:
            _stop(worker)
    finally:
        _stop(master)


def test_clean_of_a_bucket_on_a_standalone_cluster_equals_the_in_process_clean(moto, cluster, tmp_path):
    url, work = cluster
    root = str(tmp_path / "data")
    make_data_dir(root)
    moto.create_bucket("on-a-cluster")
    sync_up(moto.client(), root, "on-a-cluster", "dd")
    bucket = "s3://on-a-cluster/dd"
    env = env_for(moto, SPARK_LOCAL_IP="127.0.0.1")
    r = subprocess.run(COMMAND + ["--data-dir", bucket, "clean", "--now-ms", NOW, "--roll", "--spark-master", url],
                       capture_output=True, timeout=600, env=env)
    assert r.returncode == 0, r.stderr.decode()[-3000:]
    assert b"(spark)" in r.stderr + r.stdout and b"switched to" in r.stderr + r.stdout
    # the tasks ran in the worker's executor, not in the driver
    logs = [os.path.join(d, n) for d, _, ns in os.walk(work / "work") for n in ns if n == "stderr"]
    assert logs and any("Finished task" in open(p, errors="replace").read() for p in logs)

    # the reference clean and the reads in this process (cli_support.run_in_process): what is
    # compared is their output; only the cluster's clean needs a process (and a driver JVM) of its own
    from cli_support import run_in_process
    local = str(tmp_path / "local")
    shutil.copytree(root, local)
    r = run_in_process(["--data-dir", local, "clean", "--now-ms", NOW, "--roll", "--engine", "local"], env=env)
    assert r.returncode == 0, r.stderr.decode()
    for topic in ("orders", "plain"):
        args = ["consume", "--topic", topic, "--from-beginning", "--property", "print.key=true",
                "--property", "print.offset=true", "--property", "print.timestamp=true"]
        want = run_in_process(["--data-dir", local, *args], env=env)
        got = run_in_process(["--data-dir", bucket, *args], env=env)
        assert want.returncode == 0 and got.returncode == 0, (want.stderr, got.stderr)
        assert got.stdout == want.stdout and want.stdout, topic
