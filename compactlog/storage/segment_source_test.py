"""The segment-source seam: the local directory's implementation, and a second one (a bucket of
immutable objects, read by ranged GETs only) that the cleaner, the reader and Spark planning run
over with the same results, byte for byte, as over the directory: nothing of them reaches around
the seam to the partition directory."""

from __future__ import annotations

import ast
import dataclasses
import json
import os
import pickle
import shutil
import uuid
from dataclasses import dataclass

import pytest

from compactlog.cleaner.cleaner import Cleaner
from compactlog.cleaner.executor import InProcessExecutor
from compactlog.cleaner.task import PartitionCleanResult
from compactlog.errors import CorruptRecordError, StorageError
from compactlog.storage import files
from compactlog.storage.datadir import DataDir
from compactlog.storage.reader import PartitionReader
from compactlog.storage.segment_source import (LocalDirSource, ObjectPin, ReplacementWriter, SegmentEntry,
                                               SegmentSource)

T0 = 1_900_000_000_000
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- a test-only source: a "bucket" of immutable objects and a versioned manifest ------------------

class _Staged(ReplacementWriter):
    """A replacement uploaded as new objects; live only once a manifest names them."""

    def __init__(self, bucket: "BucketSource", base_offset: int):
        self.bucket = bucket
        self.base = base_offset
        self.parts: list[bytes] = []
        self.objects: dict[str, str] = {}

    def append(self, data: bytes) -> None:
        self.parts.append(bytes(data))

    def finish(self, indexes, mtime_ms=None) -> None:
        self.objects[files.LOG_SUFFIX] = self.bucket.put(b"".join(self.parts))
        for suffix, data in indexes:
            self.objects[suffix] = self.bucket.put(data)
        staged = self.bucket.staged()
        staged[str(self.base)] = {"objects": self.objects, "size": sum(map(len, self.parts)),
                                  "mtime_ms": mtime_ms}
        self.bucket.put_staged(staged)

    def abort(self) -> None:
        for key in self.objects.values():
            os.remove(self.bucket.object_path(key))


@dataclass(frozen=True)
class BucketSource(SegmentSource):
    """Segments as immutable objects ``objects/<uuid>`` in a directory standing for a bucket; the
    live set is the highest ``manifest.<n>.json``, committed by a create-if-absent write (S3's
    conditional PUT), never by a rename. Every read of a segment is a ranged read of its object
    (``reads`` counts them). No name of Kafka's layout exists in it."""
    root: str

    # objects
    def object_path(self, key: str) -> str:
        return os.path.join(self.root, "objects", key)

    def put(self, data: bytes) -> str:
        key = uuid.uuid4().hex
        with open(self.object_path(key), "xb") as f:
            f.write(data)
        return key

    def get_range(self, key: str, start: int, end: int) -> bytes:
        with open(os.path.join(self.root, "reads"), "a") as f:
            f.write(f"{key} {start} {end}\n")
        with open(self.object_path(key), "rb") as f:
            f.seek(start)
            return f.read(max(end - start, 0))

    # manifests
    def version(self) -> int:
        names = [n for n in os.listdir(self.root) if n.startswith("manifest.")]
        return max(int(n.split(".")[1]) for n in names) if names else 0

    def manifest(self) -> dict:
        with open(os.path.join(self.root, f"manifest.{self.version()}.json")) as f:
            return json.load(f)

    def put_manifest(self, version: int, manifest: dict) -> None:
        # create-if-absent: a concurrent commit of the same version fails instead of being overwritten
        with open(os.path.join(self.root, f"manifest.{version}.json"), "x") as f:
            json.dump(manifest, f)

    def staged(self) -> dict:
        path = os.path.join(self.root, "staged.json")
        if not os.path.exists(path):
            return {}
        with open(path) as f:
            return json.load(f)

    def put_staged(self, staged: dict) -> None:
        with open(os.path.join(self.root, "staged.json"), "w") as f:
            json.dump(staged, f)

    @classmethod
    def upload(cls, root: str, source: SegmentSource) -> "BucketSource":
        """Every live segment of ``source`` copied into a new bucket at ``root``."""
        os.makedirs(os.path.join(root, "objects"))
        bucket = cls(root)
        segments = []
        for e in source.list_segments():
            objects = {files.LOG_SUFFIX: bucket.put(source.read_range(e.base_offset, 0, e.size))}
            for suffix in sorted(e.files - {files.LOG_SUFFIX}):
                objects[suffix] = bucket.put(source.read_index(e.base_offset, suffix))
            segments.append({"base": e.base_offset, "size": e.size, "objects": objects})
        bucket.put_manifest(1, {"segments": segments})
        return bucket

    def _segment(self, base_offset: int) -> dict:
        for s in self.manifest()["segments"]:
            if s["base"] == base_offset:
                return s
        raise FileNotFoundError(self.location(base_offset))

    # the seam
    def location(self, base_offset=None, suffix=files.LOG_SUFFIX) -> str:
        return f"bucket:{self.root}" + ("" if base_offset is None else f"/{base_offset}{suffix}")

    def exists(self) -> bool:
        return os.path.isdir(self.root)

    def list_segments(self) -> list[SegmentEntry]:
        return [SegmentEntry(s["base"], s["size"], frozenset(s["objects"]), (s["objects"][files.LOG_SUFFIX],))
                for s in self.manifest()["segments"]]

    def read_segment(self, base_offset: int, size: int):
        data = self.read_range(base_offset, 0, size)
        if len(data) < size:
            raise CorruptRecordError(f"object holds {len(data)} of {size} bytes", file=self.location(base_offset))
        return data

    def read_range(self, base_offset, start, end, suffix=files.LOG_SUFFIX) -> bytes:
        return self.get_range(self._segment(base_offset)["objects"][suffix], start, end)

    def read_index(self, base_offset, suffix):
        key = self._segment(base_offset)["objects"].get(suffix)
        return None if key is None else self.get_range(key, 0, os.path.getsize(self.object_path(key)))

    def pin(self):
        return ObjectPin(self, self.list_segments())

    def create_replacement(self, base_offset: int) -> ReplacementWriter:
        return _Staged(self, base_offset)

    def discard_replacements(self) -> None:
        for entry in self.staged().values():
            for key in entry["objects"].values():
                os.remove(self.object_path(key))
        self.put_staged({})

    def commit_swap(self, groups, log=None) -> None:
        version = self.version()
        staged = self.staged()
        replaced = {b for g in groups for b in g}
        segments = [s for s in self.manifest()["segments"] if s["base"] not in replaced]
        for g in groups:
            entry = staged[str(g[0])]
            segments.append({"base": g[0], "size": entry["size"], "objects": entry["objects"]})
        self.put_manifest(version + 1, {"segments": sorted(segments, key=lambda s: s["base"])})
        self.put_staged({})


# --- data --------------------------------------------------------------------------------------

def write_partition(root: str) -> None:
    """A compacted partition of several segments: overwritten keys, tombstones, an aborted and a
    committed transaction (a ``.txnindex`` to carry over)."""
    with DataDir(root, create=True, writable=True, clock=lambda: T0) as dd:
        dd.create_topic("t", 1, {"cleanup.policy": "compact", "segment.bytes": "1200",
                                 "min.cleanable.dirty.ratio": "0.01", "index.interval.bytes": "100"})
        log = dd.open_log("t", 0)
        for i in range(60):
            log.append_records([b"k%d" % (i % 7), b"u%d" % i], [b"v%d" % i, None if i % 5 else b"x" * 40])
            if i == 20:
                log.append_records([b"k1"], [b"aborted"], producer_id=5, producer_epoch=0, base_sequence=0,
                                   transactional=True)
                log.append_control(commit=False, producer_id=5, producer_epoch=0)
            if i == 30:
                log.append_records([b"k2"], [b"committed"], producer_id=6, producer_epoch=0, base_sequence=0,
                                   transactional=True)
                log.append_control(commit=True, producer_id=6, producer_epoch=0)
            if i % 9 == 0:
                log.append_records([b"k3"], [None])
        log.roll()
        log.append_records([b"tail"], [b"tail"])
        assert len(log.segments) > 4


def segment_bytes(source: SegmentSource) -> dict:
    """Every live segment's log and index bytes, by base offset, read through the seam."""
    out = {}
    for e in source.list_segments():
        out[e.base_offset] = {files.LOG_SUFFIX: bytes(source.read_range(e.base_offset, 0, e.size)),
                              **{s: source.read_index(e.base_offset, s) for s in files.SEGMENT_SUFFIXES[1:]
                                 if s in e.files}}
    return out


@pytest.fixture
def two_copies(tmp_path):
    local = str(tmp_path / "local")
    write_partition(local)
    remote_dd = str(tmp_path / "remote")
    shutil.copytree(local, remote_dd)
    return local, remote_dd


# --- the local directory ------------------------------------------------------------------------

def test_the_local_source_lists_reads_and_names_segments(two_copies):
    local, _ = two_copies
    src = LocalDirSource(os.path.join(local, "t-0"))
    entries = src.list_segments()
    names = sorted(n for n in os.listdir(src.dir) if files.is_segment_log(n))
    assert [files.segment_file(src.dir, e.base_offset, files.LOG_SUFFIX) for e in entries] == \
        [os.path.join(src.dir, n) for n in names]
    first = entries[0]
    assert {files.LOG_SUFFIX, files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX} <= first.files
    raw = open(src.location(first.base_offset), "rb").read()
    assert first.size == len(raw) and bytes(src.read_segment(first.base_offset, first.size)) == raw
    assert src.read_range(first.base_offset, 10, 30) == raw[10:30]
    assert src.read_index(first.base_offset, files.INDEX_SUFFIX) == \
        open(src.location(first.base_offset, files.INDEX_SUFFIX), "rb").read()
    assert src.read_index(first.base_offset, ".nothing") is None
    with pytest.raises(CorruptRecordError, match="segment shrank"):
        src.read_segment(first.base_offset, first.size + 1)
    assert pickle.loads(pickle.dumps(src)) == src and hash(src) == hash(LocalDirSource(src.dir))


def test_a_cleaning_plan_carries_its_source_and_pickles(two_copies):
    local, _ = two_copies
    with DataDir(local, writable=True, clock=lambda: T0) as dd:
        cleaner = Cleaner(dd)
        (status,) = cleaner.statuses(T0, "t", 0)
        from compactlog.cleaner.cleaner import make_plan
        plan = make_plan(dd, dd.open_log("t", 0), status, T0)
    assert plan.source == LocalDirSource(os.path.join(local, "t-0")) and plan.dir == plan.source.dir
    assert pickle.loads(pickle.dumps(plan)).source == plan.source


def test_a_failed_replacement_leaves_nothing_staged(two_copies):
    local, _ = two_copies
    src = LocalDirSource(os.path.join(local, "t-0"))
    before = sorted(os.listdir(src.dir))
    w = src.create_replacement(0)
    w.append(b"partial")
    w.abort()
    w = src.create_replacement(7)
    w.append(b"x")
    w.finish([(files.INDEX_SUFFIX, b"")])
    assert sorted(os.listdir(src.dir)) == sorted(before + ["00000000000000000007.log.cleaned",
                                                           "00000000000000000007.index.cleaned"])
    src.discard_replacements()
    assert sorted(os.listdir(src.dir)) == before
    with pytest.raises(StorageError, match="needs the log"):
        src.commit_swap([[0]])


# --- the cleaner, the reader and Spark planning over a second implementation --------------------

def test_the_cleaner_over_a_bucket_equals_the_cleaner_over_the_directory(two_copies, tmp_path):
    """Plan from the broker's log, then clean through a bucket holding copies of the segments,
    with the partition directory gone: the committed segments equal the local clean's, byte for
    byte, and every segment byte was read by a ranged read."""
    local, remote_dd = two_copies
    with DataDir(local, writable=True, clock=lambda: T0) as dd:
        (out,) = Cleaner(dd).run(T0, topic="t")
        assert out.cleaned, out.error or out.status.reason
    expected = segment_bytes(LocalDirSource(os.path.join(local, "t-0")))

    with DataDir(remote_dd, writable=True, clock=lambda: T0) as dd:
        cleaner = Cleaner(dd)
        (status,) = cleaner.statuses(T0, "t", 0)
        from compactlog.cleaner.cleaner import make_plan
        plan = make_plan(dd, dd.open_log("t", 0), status, T0)
    # uploaded once the writer closed (its active segment's indexes trimmed, as the local copy's)
    bucket = BucketSource.upload(str(tmp_path / "bucket"), LocalDirSource(os.path.join(remote_dd, "t-0")))
    # the directory's files turn to noise of the same sizes: a task that reached around the seam
    # would read garbage (a missing file could pass for an empty index)
    pdir = os.path.join(remote_dd, "t-0")
    for name in os.listdir(pdir):
        size = os.path.getsize(os.path.join(pdir, name))
        with open(os.path.join(pdir, name), "wb") as f:
            f.write(os.urandom(size))
    plan = dataclasses.replace(plan, source=pickle.loads(pickle.dumps(bucket)))
    (result,) = InProcessExecutor().run([plan])
    assert isinstance(result, PartitionCleanResult), result
    assert result.end_offset == out.end_offset and result.groups == out.groups and out.groups
    assert result.stats["messages_written"] < result.stats["messages_read"]
    assert "00000000" not in "".join(os.listdir(bucket.root))
    bucket.commit_swap(result.groups)
    assert segment_bytes(bucket) == expected
    assert bucket.version() == 2 and bucket.staged() == {}
    reads = open(os.path.join(bucket.root, "reads")).read().split("\n")
    assert len(reads) > len(expected)


def test_a_failed_task_over_a_bucket_stages_nothing(two_copies, tmp_path):
    _, remote_dd = two_copies
    with DataDir(remote_dd, writable=True, clock=lambda: T0) as dd:
        (status,) = Cleaner(dd).statuses(T0, "t", 0)
        from compactlog.cleaner.cleaner import make_plan
        plan = make_plan(dd, dd.open_log("t", 0), status, T0)
    bucket = BucketSource.upload(str(tmp_path / "bucket"), LocalDirSource(os.path.join(remote_dd, "t-0")))
    # a segment object that lost its last byte: the task fails, the committed state is untouched
    seg = bucket.manifest()["segments"][1]
    path = bucket.object_path(seg["objects"][files.LOG_SUFFIX])
    os.truncate(path, seg["size"] - 1)
    objects = sorted(os.listdir(os.path.join(bucket.root, "objects")))
    (result,) = InProcessExecutor().run([dataclasses.replace(plan, source=bucket)])
    assert result.kind == "CorruptRecordError" and f"bucket:{bucket.root}/{seg['base']}.log" in result.error
    assert sorted(os.listdir(os.path.join(bucket.root, "objects"))) == objects
    assert bucket.version() == 1


def test_the_reader_and_spark_planning_over_a_bucket(two_copies, tmp_path):
    local, _ = two_copies
    pdir = os.path.join(local, "t-0")
    bucket = BucketSource.upload(str(tmp_path / "bucket"), LocalDirSource(pdir))
    with PartitionReader(pdir) as a, PartitionReader(bucket) as b:
        assert b.log_end_offset == a.log_end_offset
        assert b.read_columns().equals(a.read_columns())
        assert b.aborted_transactions(0, a.log_end_offset) == a.aborted_transactions(0, a.log_end_offset)
        assert b.offset_for_timestamp(T0) == a.offset_for_timestamp(T0)

    from compactlog.spark.planning import PartitionState, ReadSettings, TopicPartition, make_splits, read_split

    class BucketPartition(TopicPartition):
        @property
        def source(self):
            return bucket

    def rows(tp, committed):
        st = PartitionState(tp, read_committed=committed)
        splits = make_splits([(st, st.log_start, st.latest)], split_bytes=600, explicit_split=True,
                             parallelism=2, max_records=None)
        st.reader.close()
        assert len(splits) > 2
        splits = pickle.loads(pickle.dumps(splits))     # as Spark ships them to its executors
        out = []
        for split in splits:
            for batch in read_split(split, ReadSettings()):
                out += list(zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist()))
        return out, {type(r.source) for s in splits for r in s.ranges}

    for committed in (False, True):
        here, kinds = rows(TopicPartition("t", 0, pdir), committed)
        there, bucket_kinds = rows(BucketPartition("t", 0, pdir), committed)
        assert there == here and kinds == {LocalDirSource} and bucket_kinds == {BucketSource}


def test_local_partitions_lists_live_partition_directories_only(tmp_path):
    from compactlog.storage.segment_source import local_partitions
    for name in ("b-1", "a-0", "b-10", "b-0.0123456789abcdef0123456789abcdef-delete", "logs", "c-x"):
        (tmp_path / name).mkdir()
    (tmp_path / "d-0").write_text("a file, not a partition")
    found = local_partitions(str(tmp_path))
    assert [(t, p) for t, p, _ in found] == [("a", 0), ("b", 1), ("b", 10)]
    assert all(isinstance(s, LocalDirSource) and s.dir == str(tmp_path / f"{t}-{p}") for t, p, s in found)
    assert local_partitions(str(tmp_path / "missing")) == []
    assert local_partitions(str(tmp_path / "d-0")) == []


# --- structure: the cleaner and Spark planning name no segment file ------------------------------

# what forms, opens or changes a file: only a segment source does that for a segment
FILE_CALLS = {"segment_file", "filename_prefix", "offset_from_filename", "open", "mmap", "pread", "fstat",
              "stat", "remove", "replace", "rename", "utime", "fsync", "listdir", "scandir", "getsize",
              "read_file", "pin_live_segments", "live_segment_files", "stable_live_segments"}
# functions that touch files other than segments: the cleaner's run log, the data dir's partition list
ALLOWED = {"cleaner/log_format.py": {"*"},
           "spark/planning.py": {"_looks_like_data_dir"}}


def _modules():
    for rel in sorted(os.listdir(os.path.join(ROOT, "cleaner"))):
        if rel.endswith(".py") and not rel.endswith("_test.py"):
            yield f"cleaner/{rel}"
    yield "spark/planning.py"


def file_calls(rel: str) -> list[str]:
    """``function: name`` of every call or import of FILE_CALLS outside the allowed functions."""
    tree = ast.parse(open(os.path.join(ROOT, rel)).read())
    allowed = ALLOWED.get(rel, set())
    found = []

    def visit(node, where: str):
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(child, child.name)
                continue
            name = None
            if isinstance(child, ast.Call):
                f = child.func
                name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
            elif isinstance(child, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in child.names] + ([child.module] if getattr(child, "module", None) else [])
                name = next((n.rsplit(".", 1)[-1] for n in names if n.rsplit(".", 1)[-1] in FILE_CALLS), None)
            if name in FILE_CALLS and "*" not in allowed and where not in allowed:
                found.append(f"{where}: {name}")
            visit(child, where)

    visit(tree, "<module>")
    return found


@pytest.mark.parametrize("rel", list(_modules()))
def test_the_cleaner_and_spark_planning_reach_segments_only_through_the_source(rel):
    assert file_calls(rel) == []


def test_the_structural_check_sees_a_path_formed_around_the_seam(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("import mmap\nfrom ..storage import files\n\ndef f(d):\n"
                   "    return open(files.segment_file(d, 0, '.log'), 'rb')\n")
    rel = os.path.relpath(bad, ROOT)
    assert file_calls(rel) == ["<module>: mmap", "f: open", "f: segment_file"]
