"""`make test`'s scheduler (tests/lane_scheduling.py): a whole run simulated with stand-in workers,
each finishing its oldest pending test whenever the simulation picks it."""

from __future__ import annotations

import random
from types import SimpleNamespace

from lane_scheduling import SparkConfinedScheduling, read_lanes, write_worker_lanes


class Worker:
    def __init__(self, name: str):
        self.gateway = SimpleNamespace(id=name)
        self.shutting_down = False
        self.sent: list[int] = []           # indexes into the collection, in the order sent

    def send_runtest_some(self, indexes):
        self.sent.extend(indexes)

    def shutdown(self):
        self.shutting_down = True


# (file, tests): the collection in the scheduled order, longest files first
FILES = [("tests/test_corpus.py", 6), ("tests/test_readme.py", 3), ("tests/test_big.py", 5),
         ("tests/test_spark_sink.py", 2), ("tests/a_test.py", 4), ("tests/test_snapshot.py", 2),
         ("tests/b_test.py", 3), ("tests/c_test.py", 1), ("tests/test_engine_choice.py", 2)]
SPARK = {"tests/test_corpus.py", "tests/test_readme.py", "tests/test_spark_sink.py", "tests/test_snapshot.py",
         "tests/test_engine_choice.py"}
COLLECTION = [f"{path}::t{i}" for path, n in FILES for i in range(n)]


def simulate(tmp_path, workers: int, limit: int, seed: int, lanes: bool = True):
    """Run the collection through the scheduler; {worker: files it ran}, and the scheduler."""
    lanes_file = str(tmp_path / "spark-files")
    config = SimpleNamespace(getvalue=lambda name: [f"{workers}*popen"] if name == "tx" else None,
                             option=SimpleNamespace(loadscopereorder=False))
    sched = SparkConfinedScheduling(config, lanes_file=lanes_file, limit=limit)
    nodes = [Worker(f"gw{i}") for i in range(workers)]
    for node in nodes:
        sched.add_node(node)
    for node in nodes:
        if lanes:
            write_worker_lanes(lanes_file, node.gateway.id, SPARK)
        sched.add_node_collection(node, COLLECTION)
    sched.schedule()
    rng = random.Random(seed)
    done = {node: 0 for node in nodes}      # how many of its sent tests each has finished
    ran: dict[str, list[str]] = {node.gateway.id: [] for node in nodes}
    for _ in range(10 * len(COLLECTION)):
        busy = [n for n in nodes if done[n] < len(n.sent)]
        if not busy:
            break
        node = rng.choice(busy)
        index = node.sent[done[node]]
        done[node] += 1
        path = COLLECTION[index].split("::")[0]
        if path not in ran[node.gateway.id]:
            ran[node.gateway.id].append(path)
        sched.mark_test_complete(node, index)
    return ran, sched, nodes


def test_the_spark_files_run_on_two_workers_and_every_test_runs_once(tmp_path):
    for seed in range(20):
        ran, sched, nodes = simulate(tmp_path, workers=4, limit=2, seed=seed)
        sent = sorted(i for n in nodes for i in n.sent)
        assert sent == list(range(len(COLLECTION))), f"seed {seed}: every test sent once"
        with_spark = {w for w, files in ran.items() if SPARK & set(files)}
        assert len(with_spark) <= 2, f"seed {seed}: {ran}"
        assert sched.tests_finished and not sched.workqueue
        # a worker that runs Spark files takes them before any file without Spark (only two may
        # run them); the two longest files go first, to the first two workers
        for w in with_spark:
            files = ran[w]
            first_plain = next((k for k, f in enumerate(files) if f not in SPARK), len(files))
            assert not SPARK & set(files[first_plain:]), f"seed {seed}: {ran}"
        assert ran["gw0"][0] == "tests/test_corpus.py" and ran["gw1"][0] == "tests/test_readme.py"


def test_one_spark_worker(tmp_path):
    for seed in range(10):
        ran, _, nodes = simulate(tmp_path, workers=3, limit=1, seed=seed)
        assert sorted(i for n in nodes for i in n.sent) == list(range(len(COLLECTION)))
        assert [w for w, files in ran.items() if SPARK & set(files)] == ["gw0"]


def test_without_the_workers_lists_it_is_plain_loadfile(tmp_path):
    """No list written (a worker that did not run the root conftest): any worker takes any file."""
    ran, _, nodes = simulate(tmp_path, workers=4, limit=1, seed=3, lanes=False)
    assert sorted(i for n in nodes for i in n.sent) == list(range(len(COLLECTION)))
    assert len({w for w, files in ran.items() if SPARK & set(files)}) > 1


def test_a_list_is_read_whole_or_not_at_all(tmp_path):
    path = str(tmp_path / "lanes")
    assert read_lanes(path, ["gw0"]) is None
    (tmp_path / "lanes.gw0").write_text('["tests/x.py", ')          # torn: as if absent
    write_worker_lanes(path, "gw1", {"tests/b.py", "tests/a.py"})
    assert read_lanes(path, ["gw0", "gw1"]) == {"tests/a.py", "tests/b.py"}
