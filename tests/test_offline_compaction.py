"""Offline compaction of a copied Kafka data dir, and the long-running cleaner."""

from __future__ import annotations

import json
import os
import shutil

from compactlog.cli.main import main

HERE = os.path.dirname(os.path.abspath(__file__))
CONNECT = os.path.join(HERE, "data", "kafka-vectors", "mscaldas2012+kafka-connect-spooldir", "kafka-data")
NOW = 1_900_000_000_000


def test_clean_force_with_configs_on_a_kafka_written_dir(tmp_path, capsys):
    d = str(tmp_path / "d")
    shutil.copytree(CONNECT, d)
    code = main(["--data-dir", d, "clean", "--force", "--roll", "--engine", "local", "--now-ms", str(NOW),
                 "--config", "cleanup.policy=compact", "--all-topics", "--json"])
    assert code == 0
    out = {o["topic"]: o for o in map(json.loads, capsys.readouterr().out.splitlines())}
    # the README of the fixture: 39 distinct keys in the configs topic, 20 in the status topic
    assert out["docker-connect-configs"]["messagesWritten"] == 39
    assert out["docker-connect-status"]["messagesWritten"] == 20
    assert not os.path.exists(os.path.join(d, "compactlog.topics.json")), "session configs must not persist"
    assert main(["--data-dir", d, "verify"]) == 0
    capsys.readouterr()
    assert main(["--data-dir", d, "consume", "--topic", "docker-connect-configs", "--from-beginning",
                 "--output-format", "jsonl"]) == 0
    records = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    keys = [r.get("key") or r.get("key_b64") for r in records]
    assert len(keys) == len(set(keys)) == 39


def test_clean_without_policy_does_nothing_and_bad_config_is_refused(tmp_path, capsys):
    d = str(tmp_path / "d")
    shutil.copytree(CONNECT, d)
    before = {n: os.path.getsize(os.path.join(d, "docker-connect-configs-0", n))
              for n in os.listdir(os.path.join(d, "docker-connect-configs-0"))}
    assert main(["--data-dir", d, "clean", "--engine", "local", "--now-ms", str(NOW),
                 "--config", "min.cleanable.dirty.ratio=2"]) != 0
    assert "min.cleanable.dirty.ratio" in capsys.readouterr().err
    after = {n: os.path.getsize(os.path.join(d, "docker-connect-configs-0", n))
             for n in os.listdir(os.path.join(d, "docker-connect-configs-0"))}
    assert after == before


def test_cleaner_run_cleans_and_logs_in_kafka_format(tmp_path, capsys):
    from compactlog.storage.datadir import DataDir
    d = str(tmp_path / "d")
    with DataDir(d, create=True, writable=True) as dd:
        dd.create_topic("t", 2, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
        for p in range(2):
            log = dd.open_log("t", p)
            log.append_records([b"a", b"a", b"b"], [b"1", b"2", b"3"])
            log.roll()
            log.append_records([b"c"], [b"4"])
    assert main(["--data-dir", d, "--override", "log.cleaner.backoff.ms=10", "cleaner", "run",
                 "--engine", "local", "--iterations", "2"]) == 0
    with open(os.path.join(d + ".logs", "log-cleaner.log")) as f:
        text = f.read()
    assert "Log cleaner thread 0 cleaned log t-0 (dirty section = [0, 3])" in text
    assert "Log cleaner thread 0 cleaned log t-1 (dirty section = [0, 3])" in text
    assert "(kafka.log.LogCleaner)" in text
    with DataDir(d, writable=True) as dd:
        assert dd.cleaner_checkpoint.read() == {("t", 0): 3, ("t", 1): 3}


# --- offline compaction that cannot surprise (issue 17) ----------------------------------------

BHEEM = os.path.join(HERE, "data", "kafka-vectors", "Bheem6005+kafka", "kafka-logs")
OFFLINE = ["clean", "--force", "--roll", "--engine", "local", "--now-ms", str(NOW), "--config", "cleanup.policy=compact"]


def kafka_copy(tmp_path, src=BHEEM) -> str:
    d = str(tmp_path / "d")
    shutil.copytree(src, d)
    return d


def records(d, topic, capsys):
    capsys.readouterr()
    assert main(["--data-dir", d, "consume", "--topic", topic, "--from-beginning", "--output-format", "jsonl"]) == 0
    return [json.loads(x) for x in capsys.readouterr().out.splitlines()]


def test_config_without_topic_is_refused_naming_the_topics(tmp_path, capsys):
    from storage_support import tree_state
    d = kafka_copy(tmp_path)
    before = tree_state(tmp_path)
    assert main(["--data-dir", d, *OFFLINE]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert err.startswith("error: --config without --topic would apply to every topic of ")
    assert "(2: __consumer_offsets, cities)" in err and "--topic" in err and "--all-topics" in err
    assert tree_state(tmp_path) == before


def test_a_keyless_topic_is_not_emptied_unasked(tmp_path, capsys):
    """The reproduction: cities (11 records, all without a key, never compacted) was emptied with
    exit 0. Now the run is refused before anything is written, with the count per partition."""
    from storage_support import tree_state
    d = kafka_copy(tmp_path)
    before = tree_state(tmp_path)
    assert main(["--data-dir", d, *OFFLINE, "--all-topics"]) == 1
    err = capsys.readouterr().err
    assert "cities-0: 11 of 11 records have no key (offsets [0, 11))" in err
    assert err.splitlines()[-1].startswith("error: refused: 11 records without a key in 1 partition(s)")
    assert "--drop-keyless" in err and "nothing was written" in err
    assert tree_state(tmp_path) == before, "a refused run writes nothing (not even the lock or index files)"
    assert main(["--data-dir", d, *OFFLINE, "--all-topics", "--json"]) == 1
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line) == {"topic": "cities", "partition": 0, "start": 0, "end": 11, "records": 11,
                                "keyless": 11, "refused": "keyless records"}
    # named topics: only they are reached; cities stays as it was, byte for byte
    assert main(["--data-dir", d, *OFFLINE, "--topic", "__consumer_offsets", "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["messagesWritten"] == 1
    with open(os.path.join(BHEEM, "cities-0", "00000000000000000000.log"), "rb") as a, \
            open(os.path.join(d, "cities-0", "00000000000000000000.log"), "rb") as b:
        assert a.read() == b.read()
    assert not [n for n in os.listdir(os.path.join(d, "cities-0")) if n != "00000000000000000000.log"]
    assert len(records(d, "cities", capsys)) == 11
    # asked for: the keyless records go, and the summary says so
    assert main(["--data-dir", d, *OFFLINE, "--topic", "cities", "--drop-keyless"]) == 0
    out = capsys.readouterr().out
    assert "cleaned log cities-0" in out and "Found 11 invalid messages" in out
    assert records(d, "cities", capsys) == []


def test_a_topic_configured_compacted_keeps_kafkas_semantics(tmp_path, capsys):
    """Only a topic that this run's --config alone compacts is guarded: a topic configured with
    cleanup.policy=compact is cleaned as Kafka's cleaner would (keyless records are invalid)."""
    d = kafka_copy(tmp_path)
    assert main(["--data-dir", d, "topics", "alter", "--topic", "cities", "--config", "cleanup.policy=compact"]) == 0
    capsys.readouterr()
    assert main(["--data-dir", d, "clean", "--force", "--roll", "--engine", "local", "--now-ms", str(NOW),
                 "--topic", "cities", "--config", "min.cleanable.dirty.ratio=0.01", "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()
    assert json.loads(line)["invalidMessagesRead"] == 11


def _preview_and_clean(tmp_path, capsys, src, extra):
    from storage_support import tree_state
    d = kafka_copy(tmp_path, src)
    before = tree_state(tmp_path)
    assert main(["--data-dir", d, *OFFLINE, *extra, "--dry-run", "--json"]) == 0
    previews = {(p["topic"], p["partition"]): p for p in map(json.loads, capsys.readouterr().out.splitlines())}
    assert tree_state(tmp_path) == before, "a dry run writes nothing, next to the data dir neither"
    assert main(["--data-dir", d, *OFFLINE, *extra, "--json"]) == 0
    cleaned = {(o["topic"], o["partition"]): o for o in map(json.loads, capsys.readouterr().out.splitlines())}
    assert previews.keys() == cleaned.keys()
    for key, o in cleaned.items():
        p = previews[key]
        assert p["wouldClean"] == o["cleaned"], key
        if o["cleaned"]:
            assert (p["recordsRead"], p["recordsKept"], p["bytesRead"], p["bytesKept"]) == \
                   (o["messagesRead"], o["messagesWritten"], o["bytesRead"], o["bytesWritten"]), key
            assert p["removed"] == o["removed"], key
            assert p["dirtyRange"] == [o["firstDirtyOffset"], o["endOffset"]], key
    return previews


def test_dry_run_shows_what_the_clean_removes_and_writes_nothing(tmp_path, capsys):
    previews = _preview_and_clean(tmp_path / "a", capsys, BHEEM, ["--all-topics", "--drop-keyless"])
    cities = previews[("cities", 0)]
    assert (cities["recordsRemoved"], cities["bytesRemoved"], cities["removed"]) == (11, 759, {"keyless": 11})
    previews = _preview_and_clean(tmp_path / "b", capsys, CONNECT, ["--all-topics"])
    configs = previews[("docker-connect-configs", 0)]
    assert configs["recordsKept"] == 39 and configs["removed"]["superseded"] == 54 - 39


def test_dry_run_text_names_each_partition_and_the_refusal(tmp_path, capsys):
    d = kafka_copy(tmp_path)
    assert main(["--data-dir", d, *OFFLINE, "--all-topics", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"dry run at {NOW}: nothing is written (active segments as after --roll)")
    assert ("cities-0: cleaning [0, 11) would remove 11 of 11 records (759 of 820 bytes): 0 superseded, "
            "0 tombstones, 11 keyless, 0 aborted") in out
    assert any(line.startswith("__consumer_offsets-0: cleaning [0, 2) would remove 1 of 2 records") for line in out)
    assert out[-1].startswith("the clean would be refused: 11 records without a key in cities")
    assert os.listdir(tmp_path) == ["d"]


def test_explain_previews_a_config_for_one_run(tmp_path, capsys):
    from storage_support import tree_state
    d = kafka_copy(tmp_path)
    before = tree_state(tmp_path)
    assert main(["--data-dir", d, "explain", "--topic", "cities", "--config", "cleanup.policy=compact",
                 "--now-ms", str(NOW)]) == 0
    out = capsys.readouterr().out
    assert "not eligible: active segment" in out and "`explain --roll` shows what `clean --roll` would do" in out
    assert main(["--data-dir", d, "explain", "--topic", "cities", "--config", "cleanup.policy=compact",
                 "--roll", "--now-ms", str(NOW)]) == 0
    out = capsys.readouterr().out
    assert "cities-0 at %d (as after --roll):" % NOW in out
    assert "would remove 11 of 11 records (759 of 820 bytes): 0 superseded, 0 tombstones, 11 keyless" in out
    assert "`clean --config` refuses this partition unless --drop-keyless is given" in out
    assert main(["--data-dir", d, "explain", "--topic", "cities", "--config", "cleanup.policy=compact",
                 "--roll", "--now-ms", str(NOW), "--json"]) == 0
    (line,) = capsys.readouterr().out.splitlines()       # no --partition: one line per partition
    ex = json.loads(line)
    assert ex["removed"] == {"keyless": 11} and ex["refusedWithoutDropKeyless"] and ex["rolled"]
    assert tree_state(tmp_path) == before


def test_the_run_log_is_never_inside_the_data_dir(tmp_path, capsys):
    d = kafka_copy(tmp_path, CONNECT)
    assert main(["--data-dir", d, *OFFLINE, "--all-topics"]) == 0
    assert not os.path.exists(os.path.join(d, "logs"))
    with open(d + ".logs/log-cleaner.log") as f:
        assert "cleaned log docker-connect-configs-0" in f.read()
    capsys.readouterr()
    assert main(["--data-dir", d, "verify"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith("ok: 2 partition(s), ")
    # where the user says; inside the data dir is refused before anything runs
    d2 = kafka_copy(tmp_path / "2", CONNECT)
    assert main(["--data-dir", d2, *OFFLINE, "--all-topics", "--log-dir", str(tmp_path / "elsewhere")]) == 0
    assert os.path.exists(tmp_path / "elsewhere" / "log-cleaner.log") and not os.path.exists(d2 + ".logs")
    d3 = kafka_copy(tmp_path / "3", CONNECT)
    assert main(["--data-dir", d3, "--override", f"compactlog.cleaner.log.dir={tmp_path / 'by-setting'}",
                 *OFFLINE, "--all-topics"]) == 0
    assert os.path.exists(tmp_path / "by-setting" / "log-cleaner.log")
    capsys.readouterr()
    assert main(["--data-dir", d, *OFFLINE, "--all-topics", "--log-dir", os.path.join(d, "logs")]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"error: --log-dir {d}/logs is inside the data dir {d}: Kafka's loader refuses")
    assert not os.path.exists(os.path.join(d, "logs"))


def test_an_old_run_log_inside_the_data_dir_is_left_alone_and_named_by_verify(tmp_path, capsys):
    d = kafka_copy(tmp_path, CONNECT)
    os.makedirs(os.path.join(d, "logs"))
    with open(os.path.join(d, "logs", "log-cleaner.log"), "w") as f:
        f.write("[2025-01-01 00:00:00,000] INFO old (kafka.log.LogCleaner)\n")
    assert main(["--data-dir", d, *OFFLINE, "--all-topics"]) == 0
    with open(os.path.join(d, "logs", "log-cleaner.log")) as f:
        assert f.read().count("\n") == 1          # left as it was
    capsys.readouterr()
    assert main(["--data-dir", d, "verify"]) == 1
    out = capsys.readouterr().out.splitlines()
    (line,) = [x for x in out if x.startswith(os.path.join(d, "logs") + ":")]
    assert "a directory Kafka's loader refuses" in line and "run log of an earlier compactlog" in line
    assert f"{os.path.realpath(d)}.logs" in line and "move it out" in line
    assert out[-1].endswith(": 1 problem(s)")     # nothing that --repair could do


def test_verify_of_a_kafka_dir_without_indexes_is_healthy_with_a_note(tmp_path, capsys):
    d = kafka_copy(tmp_path)
    assert main(["--data-dir", d, "verify"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == (f"note: {d}/__consumer_offsets-0/00000000000000000000.index: offset index is missing: "
                      f"Kafka rebuilds it when it loads the log, and `compactlog verify --repair` rebuilds it now")
    assert out[-1] == "ok: 2 partition(s), 2 segment(s), 13 records checked, no problems (2 note(s) above)"
    # a flipped byte: the summary counts it and names the repair
    path = os.path.join(d, "cities-0", "00000000000000000000.log")
    with open(path, "r+b") as f:
        f.seek(100)
        byte = f.read(1)
        f.seek(100)
        f.write(bytes([byte[0] ^ 1]))
    assert main(["--data-dir", d, "verify"]) == 1
    last = capsys.readouterr().out.splitlines()[-1]
    assert last.startswith("2 partition(s), 2 segment(s), 13 records checked: 2 problem(s) (2 note(s) above); "
                           "`compactlog verify --repair` repairs 2 of them")
    assert main(["--data-dir", d, "verify", "--json"]) == 1
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert summary == {"partitions": 2, "segments": 2, "records": 13, "problems": 2, "notes": 2, "repairable": 2}


# --- a clean that does nothing writes nothing -------------------------------------------------

NILOUFAR = os.path.join(HERE, "data", "kafka-vectors", "Niloufar1171+LDI-POC")


def full_tree(root) -> dict:
    """Every file and directory under ``root``: (size, sha256, mtime), the lock file's too."""
    import hashlib
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            st = os.stat(path)
            if name in filenames:
                with open(path, "rb") as f:
                    out[os.path.relpath(path, root)] = (st.st_size, hashlib.sha256(f.read()).hexdigest(),
                                                        st.st_mtime_ns)
            else:
                out[os.path.relpath(path, root)] = ("dir", st.st_mtime_ns)
    return out


def test_a_clean_with_nothing_to_clean_writes_nothing(tmp_path, capsys):
    """On Kafka-written dirs (no compactlog file, indexes or snapshots missing in some) a clean
    that cleans nothing leaves every file byte for byte and mtime for mtime, and adds none: no
    lock file, index, snapshot, leader-epoch or recovery checkpoint, clean-shutdown marker or run
    log beside the dir. It used to say "nothing to clean" and write 10 files."""
    runs = {
        BHEEM: [[], ["--json"], ["--force"], ["--topic", "__consumer_offsets"], ["--topic", "cities"]],
        CONNECT: [[], ["--force", "--json"], ["--config", "cleanup.policy=compact", "--all-topics"]],
        NILOUFAR: [[], ["--force"], ["--topic", "__consumer_offsets", "--partition", "6"]],
    }
    for i, (src, variants) in enumerate(runs.items()):
        for j, extra in enumerate(variants):
            where = tmp_path / f"{i}-{j}"
            d = str(where / "d")
            shutil.copytree(src, d)
            before = full_tree(where)
            code = main(["--data-dir", d, "clean", "--engine", "local", "--now-ms", str(NOW), *extra])
            out, err = capsys.readouterr()
            assert code == 0, (src, extra, out, err)
            assert full_tree(where) == before, (src, extra, out)
            if "--json" in extra:
                assert all(not json.loads(x)["cleaned"] for x in out.splitlines()), out
            elif "--topic" in extra:
                assert out and all(": not cleaned: " in x for x in out.splitlines()), out
            else:
                assert out.startswith("nothing to clean"), out
    # the same dir, with something to clean: cleaned (and written) as before
    d = kafka_copy(tmp_path / "cleaning")
    before = full_tree(d)
    assert main(["--data-dir", d, "clean", "--roll", "--engine", "local", "--now-ms", str(NOW),
                 "--topic", "__consumer_offsets"]) == 0
    assert "cleaned log __consumer_offsets-0" in capsys.readouterr().out
    assert full_tree(d) != before and os.path.exists(os.path.join(d, "cleaner-offset-checkpoint"))


def test_a_cleaner_checkpoint_outside_the_log_is_reset_and_said(tmp_path, capsys):
    """The one write of a clean that cleans nothing: a cleaner checkpoint past the log end is reset
    to the log start, as Kafka's cleaner does (grabFilthiestCompactedLog), and the run says so."""
    from compactlog.storage.checkpoint import OffsetCheckpointFile
    from compactlog.storage.datadir import DataDir
    d = str(tmp_path / "d")
    with DataDir(d, create=True, writable=True) as dd:
        dd.create_topic("t", 1, {"cleanup.policy": "compact"})
        dd.open_log("t", 0).append_records([b"a", b"a"], [b"1", b"2"])
    checkpoint = OffsetCheckpointFile(os.path.join(d, "cleaner-offset-checkpoint"))
    checkpoint.write({("t", 0): 99})
    assert main(["--data-dir", d, "clean", "--engine", "local", "--now-ms", str(NOW)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("t-0: cleaner checkpoint 99 lay outside the log's offsets [0, 2]: reset to the log "
                          "start 0 (cleaner-offset-checkpoint), as Kafka's cleaner does\nnothing to clean:\n"), out
    assert checkpoint.read() == {("t", 0): 0}
    before = full_tree(tmp_path)
    assert main(["--data-dir", d, "clean", "--engine", "local", "--now-ms", str(NOW)]) == 0
    assert capsys.readouterr().out.startswith("nothing to clean:\n  t-0: active segment")
    assert full_tree(tmp_path) == before        # then nothing is left to do, and nothing is written


def test_cleaner_run_prints_its_stacks_on_sigquit_and_goes_on(tmp_path):
    """``kill -QUIT`` on a long-running command prints every thread's stack and the command keeps
    running (a JVM's thread dump): how a ``cleaner run`` that does not stop on ^C can be asked where
    it is. Then ^C stops it with its summary line."""
    import signal
    import subprocess
    import sys
    import time
    from compactlog.storage.datadir import DataDir
    d = str(tmp_path / "d")
    with DataDir(d, create=True, writable=True) as dd:
        dd.create_topic("t", 1, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"})
    proc = subprocess.Popen([sys.executable, "-m", "compactlog", "--data-dir", d, "--override",
                             "log.cleaner.backoff.ms=50", "cleaner", "run", "--engine", "local"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        log = os.path.join(d + ".logs", "log-cleaner.log")
        deadline = time.monotonic() + 120           # started: its run log is written
        while not os.path.exists(log) and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert proc.poll() is None and os.path.exists(log), proc.stderr.read() if proc.poll() is not None else ""
        proc.send_signal(signal.SIGQUIT)
        time.sleep(0.5)
        assert proc.poll() is None, "SIGQUIT ended the command"
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "Current thread" in err or "Thread 0x" in err, err
    assert 'File "' in err and "run_cmd" in err, err
    assert proc.returncode == 0 and out.startswith("cleaner run:"), (proc.returncode, out, err)
