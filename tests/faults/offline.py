"""The offline fault campaign: the commands that write a data dir without a broker (``clean``,
``verify --repair``, ``delete-records``, ``topics create/alter/delete``, ``configs --alter``,
``produce``, ``users``, ``acls``, ``consumer-groups``), each failed at the first and last occurrence
of every kind of write it makes (ENOSPC, EIO, a short write; a failed fsync, rename, file
creation or mkdir: ``inject.c``), and separately killed (SIGKILL) at each of those points.

A census run of each command (no fault) lists its points, as ``campaign.py`` does for the broker.
After each trial:

- the command exited 0, or non-zero with ``error: ...`` on stderr and no traceback (a kill: -9);
- ``verify`` of the dir exits 0;
- every topic-partition reads (``consume``) as it did before the command or as the command's
  fault-free run leaves it, nothing else (per partition: ``clean`` is per partition);
- the command run again without a fault exits 0 (or says the job is done) and the dir then reads
  as the fault-free run's, with no file left that the fault-free run does not have.

``python tests/faults/offline.py`` runs it whole and prints a table; ``--write`` also writes it to
``tests/faults/RESULTS-offline.md`` (or ``--results PATH``); ``--only NAME`` runs one command's
points (``clean spark``, ~50 s a trial on a loaded machine, only when named); ``--occurrences first``
and ``--syscalls create,rename`` narrow the points; ``--damage`` flips a byte of a batch first (for
``verify --repair``). Exit 3 (data set aside, kept and reported) counts as a success, and a ``.tmp``
or an empty active segment left by a kill is noted (every loader ignores the one and makes the
other), not counted.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(HERE)
REPO = os.path.dirname(TESTS)
sys.path.insert(0, HERE)
sys.path.insert(0, TESTS)

import campaign  # noqa: E402

VENV_BIN = os.path.join(REPO, ".venv", "bin")
EXE = os.path.join(VENV_BIN, "compactlog")
PY = os.path.join(VENV_BIN, "python")

FAILURES = dict(campaign.FAILURES)
FAILURES["unlink"] = ("eio",)


def cli(data: str, *args, stdin: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    env = dict(env if env is not None else os.environ, COMPACTLOG_SPARK_CDS="0")
    return subprocess.run([EXE, "--data-dir", data, *args], input=stdin, capture_output=True, text=True,
                          env=env, timeout=300)


def jsonl(records) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)


def build_template(root: str) -> str:
    """A data dir with a compacted topic of several segments a partition, a plain topic, a
    consumer group's offsets, a user and an ACL."""
    d = os.path.join(root, "template")
    shutil.rmtree(d, ignore_errors=True)
    steps = [
        (["topics", "create", "--topic", "c", "--partitions", "2", "--config", "cleanup.policy=compact",
          "--config", "segment.bytes=1024", "--config", "min.cleanable.dirty.ratio=0.01",
          "--config", "delete.retention.ms=0"], None),
        (["topics", "create", "--topic", "p", "--config", "segment.bytes=2048"], None),
        (["produce", "--topic", "c", "--input-format", "jsonl"],
         jsonl({"key": f"k{i % 7}", "value": f"v{i}", "partition": i % 2} for i in range(120))),
        (["produce", "--topic", "p", "--input-format", "jsonl"],
         jsonl({"key": f"k{i}", "value": f"w{i}"} for i in range(80))),
    ]
    for args, stdin in steps:
        r = cli(d, *args, stdin=stdin)
        assert r.returncode == 0, (args, r.stderr)
    with open(os.path.join(root, "del.json"), "w") as f:
        json.dump({"partitions": [{"topic": "p", "partition": 0, "offset": 30}], "version": 1}, f)
    return d


def damage(template: str) -> None:
    """A byte of the records of c-0's first segment flipped (a corrupt batch below the recovery
    point): what ``verify --repair`` is for (``--damage``)."""
    seg = os.path.join(template, "c-0", "00000000000000000000.log")
    with open(seg, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))


def commands(root: str) -> dict[str, tuple[list[str], str | None]]:
    """name -> (arguments after --data-dir, stdin)."""
    return {
        "clean": (["clean", "--roll", "--topic", "c"], None),
        "delete-records": (["delete-records", "--offset-json-file", os.path.join(root, "del.json")], None),
        "topics create": (["topics", "create", "--topic", "n", "--partitions", "2"], None),
        "topics alter": (["topics", "alter", "--topic", "p", "--partitions", "3"], None),
        "topics delete": (["topics", "delete", "--topic", "p"], None),
        "configs alter": (["configs", "--alter", "--entity-type", "topics", "--entity-name", "p",
                           "--add-config", "retention.ms=12345"], None),
        "produce": (["produce", "--topic", "p", "--input-format", "jsonl"],
                    jsonl({"key": f"x{i}", "value": f"y{i}"} for i in range(50))),
        "users": (["users", "--alter", "--entity-type", "users", "--entity-name", "alice",
                   "--add-config", "SCRAM-SHA-256=[iterations=4096,password=pw]"], None),
        "acls": (["acls", "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "p"], None),
        "verify --repair": (["verify", "--repair"], None),
        # a Spark session a trial (~15 s): run with --only "clean spark"
        "clean spark": (["clean", "--roll", "--topic", "c", "--engine", "spark"], None),
        "consumer-groups reset": (["consumer-groups", "--reset-offsets", "--group", "g2", "--topic", "p",
                                   "--to-offset", "5", "--execute"], None),
    }


# -- what a dir holds -----------------------------------------------------------------------------

CHECKER = r"""
import json, os, sys
sys.path.insert(0, sys.argv[2])
from cli_support import run_in_process
d = sys.argv[1]
out = {}
v = run_in_process(["--data-dir", d, "verify"], text=True)
out["verify"] = [v.returncode, v.stdout[-2000:], v.stderr[-2000:]]
t = run_in_process(["--data-dir", d, "topics", "list"], text=True)
topics = [x for x in t.stdout.split() if x and not x.startswith("__")]
parts = {}
for topic in topics:
    r = run_in_process(["--data-dir", d, "consume", "--topic", topic, "--from-beginning", "--output-format", "jsonl"], text=True)
    if r.returncode != 0:
        parts[topic] = {"error": r.stderr[-1000:]}
        continue
    for line in r.stdout.splitlines():
        rec = json.loads(line)
        parts.setdefault(f"{topic}-{rec['partition']}", []).append([rec["offset"], rec.get("key"), rec.get("value")])
import re
desc = run_in_process(["--data-dir", d, "topics", "describe"], text=True)
for line in desc.stdout.splitlines():
    if line.startswith("Topic:") and not line.startswith("Topic: __"):
        parts["describe " + line.split()[1]] = re.sub(r"TopicId: \S+", "", line)
for name, args in (("users", ["users", "--describe", "--entity-type", "users"]), ("acls", ["acls", "--list"]),
                   ("groups", ["consumer-groups", "--describe", "--all-groups"])):
    r = run_in_process(["--data-dir", d, *args], text=True)
    parts[name] = [r.returncode, r.stdout]
out["parts"] = parts
out["topics"] = topics
files, empty = [], []
for base, dirs, names in os.walk(d):
    for n in names:
        path = os.path.join(base, n)
        files.append(os.path.relpath(path, d))
        if os.path.getsize(path) == 0 and n.endswith((".log", ".index", ".timeindex")):
            empty.append(files[-1])
out["files"] = sorted(files)
out["empty_segments"] = empty
print(json.dumps(out).replace(d, "DIR"))     # the same for a copy of the dir elsewhere
"""


def state(d: str) -> dict:
    r = subprocess.run([PY, "-c", CHECKER, d, TESTS], capture_output=True, text=True, timeout=300)
    if r.returncode != 0:
        return {"checker_error": r.stderr[-2000:]}
    return json.loads(r.stdout)


# -- trials ---------------------------------------------------------------------------------------

@dataclasses.dataclass
class Trial:
    command: str
    point: str
    fired: bool
    code: int
    message: str
    problems: list
    notes: list = dataclasses.field(default_factory=list)

    @property
    def outcome(self) -> str:
        return "ok" if not self.problems else "BROKE"


def injector_env(injector: str, d: str, **kw) -> dict:
    env = dict(os.environ, LD_PRELOAD=injector, FAULT_DIR=d)
    env.update({k: str(v) for k, v in kw.items()})
    return env


def run_census(work: str, template: str, injector: str, name: str, args, stdin) -> tuple[dict, dict]:
    d = os.path.join(work, "census")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(template, d)
    log = os.path.join(work, "census.log")
    if os.path.exists(log):
        os.remove(log)
    r = cli(d, *args, stdin=stdin, env=injector_env(injector, d, FAULT_LOG=log))
    assert r.returncode in (0, 3), (name, r.stderr)     # 3: done, data set aside (verify --repair)
    lines = open(log).read().splitlines() if os.path.exists(log) else []
    return campaign.census(lines, d), state(d)


def compare(before: dict, after: dict, got: dict, *, per_partition: bool) -> list[str]:
    problems = []
    if "checker_error" in got:
        return [f"checker: {got['checker_error'][-300:]}"]
    # 3: bytes recovery set aside, kept and reported; or what verify said before the command
    if got["verify"][0] not in (0, 3, before["verify"][0]):
        problems.append(f"verify exit {got['verify'][0]}: {(got['verify'][1] + got['verify'][2])[-400:]}")
    b, a, g = before["parts"], after["parts"], got["parts"]
    if per_partition:
        for tp in sorted(set(b) | set(a) | set(g)):
            if g.get(tp) not in (b.get(tp), a.get(tp)):
                problems.append(f"{tp}: reads neither as before nor as after ({len(g.get(tp) or [])} records)")
    elif g != b and g != a:
        diff = [tp for tp in sorted(set(b) | set(a) | set(g)) if g.get(tp) not in (b.get(tp), a.get(tp))]
        problems.append(f"reads neither as before nor as after: {diff or 'mixed partitions'}")
    return problems


def run_trial(work: str, template: str, injector: str, name: str, args, stdin, point, before: dict,
              after: dict, failure: str) -> Trial:
    d = os.path.join(work, "trial")
    shutil.rmtree(d, ignore_errors=True)
    shutil.copytree(template, d)
    fired = os.path.join(work, "fired")
    if os.path.exists(fired):
        os.remove(fired)
    env = injector_env(injector, d, FAULT_SYSCALL=point.syscall, FAULT_GLOB=point.glob.replace(
        os.path.join(work, "census"), d), FAULT_AT=point.occurrence, FAULT_KIND=failure, FAULT_FIRED=fired)
    r = cli(d, *args, stdin=stdin, env=env)
    problems, notes_out = [], []
    message = (r.stderr.strip().splitlines() or [""])[-1][:160]
    if failure == "kill" and r.returncode == -9:
        pass
    elif failure == "kill" and r.returncode == 0 and os.path.exists(fired):
        problems.append("exit 0 after a kill (of a process it started): nothing said")
    elif r.returncode not in (0, 3):       # a fault, or a kill of a child (a Spark worker): said
        if "Traceback" in r.stderr:
            problems.append("traceback: " + r.stderr[-600:])
        elif not any(line.startswith("error: ") for line in r.stderr.splitlines()):
            problems.append(f"exit {r.returncode} without an error line: {r.stderr[-300:]!r}")
    got = state(d)
    per_partition = name.startswith("clean")
    problems += compare(before, after, got, per_partition=per_partition)
    # the command again, without a fault, finishes the job
    r2 = cli(d, *args, stdin=stdin if got.get("parts") == before["parts"] or name != "produce" else None)
    if name == "produce" and got.get("parts") != before["parts"]:
        pass        # the records went in already: a second produce would add them twice
    elif r2.returncode not in (0, 3) and not (name.startswith("topics") and "already exists" in r2.stderr
                                      or name == "topics delete" and "does not exist" in r2.stderr
                                      or name == "topics alter" and "would not be an increase" in r2.stderr):
        problems.append(f"re-run exit {r2.returncode}: {r2.stderr.strip()[-300:]}")
    final = state(d)
    if "checker_error" not in final:
        if final["parts"] != after["parts"]:
            problems.append("after the re-run it reads differently from the fault-free run: " + ", ".join(
                tp for tp in sorted(set(final["parts"]) | set(after["parts"]))
                if final["parts"].get(tp) != after["parts"].get(tp)))
        extra = sorted(set(final["files"]) - set(after["files"]) - {".lock"})
        # a checkpoint's or metadata file's .tmp a kill left before its rename: Kafka's loader and
        # compactlog's ignore it and the next write of that file replaces it (noted, not a problem)
        notes = [f for f in extra if f.endswith(".tmp") or f in final.get("empty_segments", ())]
        if [f for f in extra if f not in notes]:
            problems.append(f"left over after the re-run: {[f for f in extra if f not in notes][:6]}")
        if notes:
            notes_out.append(f"left over (ignored by every loader, or an empty active segment a writer makes): "
                             f"{len(notes)} file(s), e.g. {notes[:2]}")
        if final["verify"][0] not in (0, 3):
            problems.append(f"verify after the re-run exit {final['verify'][0]}")
    else:
        problems.append(final["checker_error"][-300:])
    return Trial(name, f"{failure} on {point.syscall} #{point.occurrence} of {point.kind}",
                 os.path.exists(fired), r.returncode, message, problems, notes_out)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--only", action="append")
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--results", default=os.path.join(HERE, "RESULTS-offline.md"))
    ap.add_argument("--kinds", default="fault,kill")
    ap.add_argument("--work")
    ap.add_argument("--damage", action="store_true", help="a corrupt batch in c-0 first (for verify --repair)")
    ap.add_argument("--occurrences", default="first,last", help="first, last or both")
    ap.add_argument("--syscalls", help="only these (comma list)")
    ns = ap.parse_args(argv)
    injector = campaign.build_injector()
    work = ns.work or tempfile.mkdtemp(prefix="offline-faults-")
    os.makedirs(work, exist_ok=True)
    template = build_template(work)
    if ns.damage:
        damage(template)
    before = state(template)
    trials = []
    for name, (args, stdin) in commands(work).items():
        if ns.only and name not in ns.only or not ns.only and name == "clean spark":
            continue
        counts, after = run_census(work, template, injector, name, args, stdin)
        points = campaign.points_of(counts, occurrences=tuple(ns.occurrences.split(",")))
        if ns.syscalls:
            points = [p for p in points if p.syscall in ns.syscalls.split(",")]
        # one Point per (syscall, kind, occurrence), the failures here
        seen = set()
        for p in points:
            key = (p.syscall, p.kind, p.glob, p.occurrence)
            if key in seen:
                continue
            seen.add(key)
            failures = []
            if "fault" in ns.kinds:
                failures += list(FAILURES.get(p.syscall, ()))
            if "kill" in ns.kinds:
                failures.append("kill")
            for failure in failures:
                t0 = time.monotonic()
                trial = run_trial(work, template, injector, name, args, stdin, p, before, after, failure)
                trials.append(trial)
                print(f"{trial.outcome:5} {name:16} {trial.point:60} fired={trial.fired} exit={trial.code} "
                      f"{time.monotonic() - t0:4.1f}s {trial.message[:80]}", flush=True)
                for problem in trial.notes:
                    print("      note: " + problem[:300], flush=True)
                for problem in trial.problems:
                    print("      " + problem[:500].replace("\n", " / "), flush=True)
    broke = [t for t in trials if t.problems]
    print(f"{len(trials)} trials, {sum(t.fired for t in trials)} fired, {len(broke)} broke a promise")
    if ns.write:
        with open(ns.results, "w") as f:
            f.write("# Offline fault campaign: results\n\nWritten by `python tests/faults/offline.py --write` "
                    "(see its docstring for the checks).\n\n")
            f.write(f"{len(trials)} trials, {sum(t.fired for t in trials)} fired, {len(broke)} broke a promise.\n\n")
            f.write("| command | point | fired | exit | result |\n|---|---|---|---|---|\n")
            for t in trials:
                f.write(f"| {t.command} | {t.point} | {'yes' if t.fired else 'no'} | {t.code} | "
                        f"{t.outcome}{': ' + '; '.join(p[:120] for p in t.problems).replace('|', '/') if t.problems else ''}"
                        f"{' (' + '; '.join(t.notes) + ')' if t.notes else ''} |\n")
    return 1 if broke else 0


if __name__ == "__main__":
    sys.exit(main())
