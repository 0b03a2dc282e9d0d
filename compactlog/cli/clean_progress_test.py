"""``clean`` and ``cleaner run``: the progress display's hooks and the summary line they end with."""

from __future__ import annotations

import json

from compactlog.cleaner.executor import InProcessExecutor
from compactlog.cli.clean_progress import CleanProgress, CleanTotals, human_bytes
from compactlog.cli.main import main
from compactlog.storage.datadir import DataDir

NOW = 1_900_000_000_000


def make_dir(path, partitions=2):
    with DataDir(str(path), create=True, writable=True) as dd:
        dd.create_topic("t", partitions, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        for p in range(partitions):
            log = dd.open_log("t", p)
            log.append_records([b"a", b"a", b"b"], [b"1", b"2", b"3"])
            log.roll()
            log.append_records([b"c"], [b"4"])


def test_human_bytes():
    assert [human_bytes(n) for n in (0, 1023, 1024, 1536, 5 << 20)] == ["0 B", "1023 B", "1.0 KiB", "1.5 KiB",
                                                                         "5.0 MiB"]


def test_clean_ends_with_a_summary_line_and_json_has_none(tmp_path, capsys):
    make_dir(tmp_path / "d")
    assert main(["--data-dir", str(tmp_path / "d"), "clean", "--engine", "local", "--now-ms", str(NOW)]) == 0
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("cleaned 2 partition(s) in ") and "(in-process): " in last
    assert "2 of 6 records removed" in last and " -> " in last
    make_dir(tmp_path / "e")
    assert main(["--data-dir", str(tmp_path / "e"), "clean", "--engine", "local", "--json", "--now-ms", str(NOW)]) == 0
    assert all(json.loads(line)["cleaned"] for line in capsys.readouterr().out.splitlines())


def test_cleaner_run_ends_with_a_summary_line(tmp_path, capsys):
    make_dir(tmp_path / "d")
    assert main(["--data-dir", str(tmp_path / "d"), "--override", "log.cleaner.backoff.ms=10", "cleaner", "run",
                 "--engine", "local", "--iterations", "2"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert line.startswith("cleaner run: 2 round(s), cleaned 2 partition(s) in ")
    assert "2 of 6 records removed" in line


def test_the_in_process_executor_tells_each_partition_and_the_display_lets_go(tmp_path):
    from compactlog.cleaner.cleaner import Cleaner
    make_dir(tmp_path / "d")
    inner = InProcessExecutor()
    runner = CleanProgress(inner, enabled=True)      # stderr is not a terminal here: drawn nowhere
    seen = []
    started, done = runner.task_started, runner.task_done
    runner.task_started = lambda plan: (seen.append(("start", plan.partition)), started(plan))
    runner.task_done = lambda plan, result: (seen.append(("done", plan.partition)), done(plan, result))
    with DataDir(str(tmp_path / "d"), writable=True) as dd, runner:
        outcomes = Cleaner(dd, runner).run(NOW)
        runner.round_done(outcomes)
    assert seen == [("start", 0), ("done", 0), ("start", 1), ("done", 1)]
    assert inner.progress is None                    # only set while a round runs
    t = runner.totals
    assert (t.rounds, t.cleaned, t.failed, t.records_read, t.records_removed) == (1, 2, 0, 6, 2)
    assert runner.name == "in-process"


def test_totals_text_names_failures_and_stopped_cleans():
    class O:
        def __init__(self, **kw):
            self.error, self.aborted, self.cleaned, self.stats = None, False, False, None
            self.start_size = self.end_size = 0
            self.__dict__.update(kw)
    t = CleanTotals()
    t.add([O(error="boom"), O(aborted=True)])
    text = t.text()
    assert text.startswith("cleaned 0 partition(s) in ") and text.endswith(
        "; 1 failed; 1 stopped for a change of the log (cleaned again later)")
