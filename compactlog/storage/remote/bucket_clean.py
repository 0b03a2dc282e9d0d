"""Cleaning a Kafka data dir copied to a bucket straight over its objects: a local *shadow* of the
data dir for the data dir's own logic, the segments' bytes read from the objects, the cleaned
segments written as objects of the new generation.

* ``build_shadow``: the listing's small files (indexes, producer snapshots, checkpoints, the
  topics file) fetched, each ``.log`` a sparse file carrying its object's key (``object_body``).
  Kafka's loader, the planner and the swap then run unchanged on the shadow; local disk holds the
  small files only (``benchmarks/bucket_data_dir.py`` measures it).
* ``ShadowDirSource``: the cleaner's segment source over the shadow's partition. A task (in this
  process or a Spark executor on another machine) reads each segment's bytes from its object by
  ranged GETs and never opens the shadow; it is plain data (the keys of the live segments as the
  driver's shadow resolved them, and the bytes of any index the loader rebuilt, which the bucket
  does not hold). Its replacement (``ObjectReplacement``) writes the cleaned ``.log`` as the new
  generation's object by one create-only PUT (a temp file of at most one segment before it, or
  S3's multipart above ``multipart.threshold``); its indexes travel back with the task's small
  result. The driver's ``commit_swap`` puts a marked sparse ``.cleaned`` file and the indexes in
  the shadow and swaps them in by Kafka's renames, as a local clean does.

A task that dies leaves its objects under the new generation's prefix, never switched to: the
publish step (``cli/bucket_dir.py``) deletes every object there that the shadow does not name
before the switch, and a run that does not switch deletes the prefix. Kafka has no counterpart.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass

from ...errors import CorruptRecordError, StorageError
from .. import files, object_body
from ..segment_source import LocalDirSource, ReplacementWriter
from .store import ObjectNotFound, PreconditionFailed, RangeNotSatisfiable, StoreConfig
from .tiered_read import shared_store

LOCAL_SUFFIXES = (files.INDEX_SUFFIX, files.TIME_INDEX_SUFFIX, files.TXN_INDEX_SUFFIX)


def digest(data) -> tuple[int, bytes]:
    return len(data), hashlib.blake2b(data, digest_size=16).digest()


def file_digest(path: str) -> tuple[int, bytes]:
    h = hashlib.blake2b(digest_size=16)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return os.path.getsize(path), h.digest()


def build_shadow(listing, shadow: str) -> dict[str, tuple[int, bytes]]:
    """The shadow of the listing's data dir at ``shadow``: every object but the ``.log`` ones
    fetched (one GET each), every ``.log`` a sparse file marked with its key (no request).
    Returns rel -> (size, digest) of what was fetched, and rel -> (size, key) of the marked."""
    store, prefix = listing.bucket.store, listing.bucket.prefix
    fetched = {}
    for key, (size, _etag) in listing.objects.items():
        rel = key[len(prefix):]
        if not rel or rel.endswith("/") or ".." in rel.split("/"):
            continue
        path = os.path.join(shadow, *rel.split("/"))
        data = None
        if not _is_log(rel):
            try:
                data = store.get(key).data
            except ObjectNotFound:
                if size == 0:
                    # a folder marker ("<dir>/", zero bytes, as the S3 console's "Create folder"
                    # writes): obstore lists it without its slash, so its name does not GET. Not
                    # a file of the data dir; the folder is made by the files under it, if any
                    continue
                raise StorageError(f"{listing.bucket.url_of(key)}: the object is gone (the bucket changed "
                                   f"after it was listed)") from None
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            if data is None:
                object_body.mark(path, key, size)
            else:
                with open(path, "wb") as f:
                    f.write(data)
        except OSError as e:
            # a key no directory tree can hold beside the others (an object that is also a prefix
            # of other objects, a part too long for a file name): named, not the shadow's path
            raise StorageError(f"{listing.bucket.url_of(key)}: cannot be held as a file of a data dir "
                               f"({e.strerror or e}); move it out of the prefix") from None
        fetched[rel] = ("object", size, key) if data is None else ("file",) + digest(data)
    return fetched


def _is_log(rel: str) -> bool:
    """A segment's ``.log`` (also ``.log.swap``/``.log.cleaned``/``.log.deleted`` of a copy taken
    mid-clean: Kafka's loader finishes or removes them, and reads them first)."""
    name = rel.rpartition("/")[2]
    stem, dot, rest = name.partition(".")
    return bool(dot) and stem.isdecimal() and (rest == "log" or rest.startswith("log."))


class Fetched(bytes):
    """A segment's bytes from its object that the cleaner may drop between its passes (its
    ``release`` closes what has ``close``): fetched again for the rewrite rather than every
    segment of a partition held in memory at once (one segment at a time, as a mapping is)."""

    def close(self) -> None:
        pass


@dataclass(frozen=True)
class ShadowDirSource(LocalDirSource):
    """A partition of the shadow (``dir``) whose segments a task reads from the bucket (see the
    module docstring). ``bodies``: (base offset, key) of each live segment as the driver's shadow
    names it; ``indexes``: (base offset, suffix, key or bytes) of each index (bytes when the
    loader rebuilt it: the bucket does not hold it); ``out_prefix``: the new generation's key
    prefix, where replacements go."""
    store_config: StoreConfig = None
    dir_name: str = ""
    bodies: tuple = ()
    indexes: tuple = ()
    out_prefix: str = ""

    @classmethod
    def of(cls, log, store_config: StoreConfig, out_prefix: str, fetched: dict) -> "ShadowDirSource":
        """The source of a log of the shadow, as the driver sees it now."""
        dir_name = os.path.basename(log.dir)
        bodies, indexes = [], []
        for seg in log.segments:
            path = files.segment_file(log.dir, seg.base_offset, files.LOG_SUFFIX)
            key = object_body.key_of(path) if os.path.exists(path) else None
            if key is not None:
                bodies.append((seg.base_offset, key))
            for suffix in LOCAL_SUFFIXES:
                p = files.segment_file(log.dir, seg.base_offset, suffix)
                if not os.path.exists(p):
                    continue
                rel = f"{dir_name}/{os.path.basename(p)}"
                got = fetched.get(rel)
                if got is not None and got[0] == "file" and got[1:] == file_digest(p):
                    indexes.append((seg.base_offset, suffix, store_config.key_prefix + rel))
                else:
                    with open(p, "rb") as f:
                        indexes.append((seg.base_offset, suffix, f.read()))
        return cls(log.dir, store_config, dir_name, tuple(bodies), tuple(indexes), out_prefix)

    @property
    def store(self):
        return shared_store(self.store_config)

    def _body_key(self, base_offset: int) -> str | None:
        return dict(self.bodies).get(base_offset)

    def _url(self, key: str) -> str:
        from .bucket import Bucket
        return Bucket(self.store_config, "").url_of(key)

    def location(self, base_offset: int | None = None, suffix: str = files.LOG_SUFFIX) -> str:
        """Where a segment's bytes are, as messages and ``explain`` name them: its object in the
        bucket (the shadow's paths are opened by the swap alone, through ``dir``)."""
        if base_offset is None:
            return self._url(self.store_config.key_prefix + self.dir_name)
        key = self._body_key(base_offset) if suffix == files.LOG_SUFFIX else None
        if key is None:
            key = f"{self.store_config.key_prefix}{self.dir_name}/{files.filename_prefix(base_offset)}{suffix}"
        return self._url(key)

    def __str__(self) -> str:
        return self.location()

    def read_segment(self, base_offset: int, size: int):
        key = self._body_key(base_offset)
        if key is None or size == 0:     # a segment of the shadow's own (the empty one a roll adds)
            return LocalDirSource(self.dir).read_segment(base_offset, size) if size else b""
        data = self._get(key, 0, size)
        if len(data) < size:
            raise CorruptRecordError(f"segment object holds {len(data)} bytes, it was listed with {size}",
                                     file=self.location(base_offset))
        return Fetched(data)

    def read_range(self, base_offset: int, start: int, end: int, suffix: str = files.LOG_SUFFIX) -> bytes:
        if end <= start:
            return b""
        if suffix == files.LOG_SUFFIX:
            key = self._body_key(base_offset)
            return self._get(key, start, end) if key else LocalDirSource(self.dir).read_range(base_offset, start, end)
        return (self.read_index(base_offset, suffix) or b"")[start:end]

    def read_index(self, base_offset: int, suffix: str) -> bytes | None:
        for b, s, where in self.indexes:
            if b == base_offset and s == suffix:
                if isinstance(where, bytes):
                    return where
                return self.store.get(where).data
        return None

    def _get(self, key: str, start: int, end: int) -> bytes:
        try:
            return self.store.get_range(key, start, end)
        except RangeNotSatisfiable:
            return b""
        except ObjectNotFound:
            raise StorageError(f"{key}: the object is gone (the bucket changed after it was listed)") from None

    def pin(self):
        from ..segment_source import ObjectPin
        return ObjectPin(self, self.list_segments())

    def discard_replacements(self) -> None:
        LocalDirSource(self.dir).discard_replacements()

    # -- replacing: the cleaned segment as an object of the new generation
    def create_replacement(self, base_offset: int, members=None) -> "ObjectReplacement":
        return ObjectReplacement(self, base_offset)

    def commit_swap(self, groups, log=None, staged=None) -> None:
        """Each task's replacement into the shadow as ``.cleaned`` files (the log a marked sparse
        file of its object, the indexes from the result), then Kafka's renames (``LocalDirSource``)."""
        for d in staged or ():
            if d.get("kind") != "object":
                continue
            base = d["base"]
            path = files.segment_file(self.dir, base, files.LOG_SUFFIX, files.CLEANED_SUFFIX)
            object_body.mark(path, d["key"], d["size"])
            for suffix, data in d["indexes"]:
                with open(files.segment_file(self.dir, base, suffix, files.CLEANED_SUFFIX), "wb") as f:
                    f.write(data)
            if d.get("mtime_ms") is not None:
                ns = d["mtime_ms"] * 1_000_000
                os.utime(path, ns=(ns, ns))
        super().commit_swap(groups, log, staged)


class ObjectReplacement(ReplacementWriter):
    """One cleaned segment: its log to a temp file (one segment at most), then one create-only
    PUT as ``<out_prefix><topic>-<N>/<base>.log`` (multipart above the store's threshold); the
    indexes are kept for the result. The output of a round is a function of its input, so an
    object a failed earlier attempt of the same task left under that key with the same size is
    this attempt's too (a Spark task retried)."""

    def __init__(self, source: ShadowDirSource, base_offset: int):
        self.source = source
        self.base_offset = base_offset
        self.key = f"{source.out_prefix}{source.dir_name}/{files.filename_prefix(base_offset)}{files.LOG_SUFFIX}"
        # a file with no name (unlinked at once): a process killed while it exists leaves nothing
        fd, path = tempfile.mkstemp(prefix="compactlog-cleaned-", suffix=".log")
        os.unlink(path)
        self._log = os.fdopen(fd, "w+b")
        self.path = f"/proc/self/fd/{fd}"
        self.size = 0
        self.descriptor: dict | None = None
        self._put = False

    def append(self, data: bytes) -> None:
        self._log.write(data)
        self.size += len(data)

    def finish(self, indexes, mtime_ms: int | None = None) -> None:
        self._log.flush()
        from . import faults
        faults.maybe_die("bucket-clean-segment-written")
        store = self.source.store
        try:
            self._log.seek(0)
            try:
                store.put_if_absent(self.key, self._log, size=self.size)
            except PreconditionFailed:
                if store.head(self.key).size != self.size:
                    raise StorageError(f"{self.key}: another writer's object is in the way") from None
            self._put = True
        finally:
            self._log.close()
        self.descriptor = {"kind": "object", "base": self.base_offset, "key": self.key, "size": self.size,
                           "indexes": [(s, bytes(d)) for s, d in indexes], "mtime_ms": mtime_ms}

    def abort(self) -> None:
        try:
            self._log.close()
        except Exception:       # noqa: BLE001 - closing a half-written temp file
            pass
        if self._put:
            try:
                self.source.store.delete(self.key)
            except Exception:   # noqa: BLE001 - left for the publish step's sweep of the prefix
                pass


def _unlink(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


# -- a new generation of the bucket's data dir, written beside it and switched to ------------------

class ShadowGeneration:
    """One run that changes a bucket's data dir (``clean``, the ``kafka-log`` sink): the shadow it
    works on (``shadow``; ``sources(log)`` for the cleaner's plans), then ``publish``: the changed
    data dir as a new generation ``<prefix>.compactlog-<n>-<id>/`` and the switch object moved to
    it by one conditional PUT. Made by ``shadow_generation``."""

    def __init__(self, root, listing, shadow: str, fetched: dict, etag: str | None, generation: int,
                 out_prefix: str):
        self.root, self.listing, self.shadow, self.fetched = root, listing, shadow, fetched
        self.etag, self.generation, self.out_prefix = etag, generation, out_prefix
        self.read_config = listing.bucket.config if listing is not None else root.config
        self.published = False

    def sources(self, log) -> ShadowDirSource:
        return ShadowDirSource.of(log, self.read_config, self.out_prefix, self.fetched)

    def publish(self) -> dict | None:
        """The shadow as the new generation: the objects tasks wrote there are kept; every other
        file is added by a server-side copy of its object when it is the one read (CopyObject: no
        bytes through here), else a create-only PUT of the shadow's file (small files, and new
        segments the sink appended to); anything else under the prefix (a dead task's object) is
        deleted; then the switch. None (nothing written) when the shadow is as it was read; a
        CompactlogError when another run moved the switch meanwhile (412)."""
        import json
        import time
        from ...errors import CompactlogError
        from . import bucket as B
        from . import faults
        here = {}
        for d, _, names in os.walk(self.shadow):
            for n in names:
                full = os.path.join(d, n)
                here[os.path.relpath(full, self.shadow).replace(os.sep, "/")] = full
        read_prefix = self.read_config.key_prefix
        fetched, new_prefix = self.fetched, self.out_prefix
        plan = {}       # rel -> ("keep",) | ("copy", src key) | ("put", path) | ("range", src key, size)
        for rel, full in sorted(here.items()):
            key = object_body.key_of(full)
            size = os.path.getsize(full)
            if key is not None:
                if key == new_prefix + rel:
                    plan[rel] = ("keep",)
                elif key == read_prefix + rel and fetched.get(rel, (None, None))[1] == size:
                    plan[rel] = ("copy", key)
                else:           # renamed by Kafka's loader (a .swap finished) or cut by recovery
                    plan[rel] = ("range", key, size)
            elif fetched.get(rel, ("?",))[0] == "file" and fetched[rel][1:] == file_digest(full):
                plan[rel] = ("copy", read_prefix + rel)
            else:
                plan[rel] = ("put", full)
        if set(here) == set(fetched) and all(p[0] == "copy" and p[1] == read_prefix + rel for rel, p in plan.items()):
            return None
        store = self.root.store
        for rel, p in plan.items():
            dst = new_prefix + rel
            if p[0] == "copy":
                store.copy(p[1], dst)
            elif p[0] == "put":
                with open(p[1], "rb") as f:
                    store.put_if_absent(dst, f, size=os.path.getsize(p[1]))
            elif p[0] == "range":
                store.put_if_absent(dst, store.get_range(p[1], 0, p[2]) if p[2] else b"")
        store.delete_many([m.key for m in store.list(new_prefix) if m.key[len(new_prefix):] not in plan])
        faults.maybe_die("bucket-clean-objects")
        root = self.root
        switch = json.dumps({"version": B.SWITCH_VERSION, "generation": self.generation, "current": new_prefix,
                             "previous": read_prefix, "cleanedAtMs": int(time.time() * 1000)},
                            indent=2).encode() + b"\n"
        refused = False
        try:
            if self.etag is None:
                store.put_if_absent(B.switch_key(root.prefix), switch)
            else:
                store.put_if_match(B.switch_key(root.prefix), switch, self.etag)
        except PreconditionFailed:
            refused = True
        except BaseException:
            # an answer lost (a timeout) may hide a switch that landed: the objects go only if it did not
            try:
                landed = (B.read_switch(root)[0] or {}).get("current") == new_prefix
            except Exception:       # noqa: BLE001 - unknown: keep the objects rather than risk the switch
                landed = True
            self.published = landed
            raise
        if refused:
            # 412 is also what the client's retry of our own write gets when the first attempt
            # landed and its answer was lost: the switch then names this run's generation, which
            # must stay (deleting it left the switch naming nothing, every reader failing)
            try:
                ours = (B.read_switch(root)[0] or {}).get("current") == new_prefix
            except BaseException:
                self.published = True       # unknown: keep the objects rather than risk the switch
                raise
            if not ours:
                raise CompactlogError(f"{root.url}: another clean switched the bucket to a new generation during "
                                      f"this one; nothing of this run was kept: run it again")
        self.published = True
        faults.maybe_die("bucket-clean-switch")
        swept = sweep_generations(root, keep={new_prefix, read_prefix})
        return {"url": root.url_of(new_prefix.rstrip("/")), "switch": root.url_of(B.switch_key(root.prefix)),
                "generation": self.generation, "read": root.url_of(read_prefix.rstrip("/")) if read_prefix else root.url,
                "swept": swept}


@contextmanager
def shadow_generation(url: str, *, allow_empty: bool = False):
    """A ``ShadowGeneration`` of the copied data dir at ``url`` (the generation its switch names);
    ``allow_empty``: a prefix with no partitions yet starts as an empty data dir (the sink's first
    write). The shadow and anything written but not switched to are removed on the way out."""
    from ...errors import CompactlogError
    from . import bucket as B
    from . import keys
    root = B.parse_bucket_url(url)
    try:
        listing = B.list_bucket(root)
    except StorageError:
        if not allow_empty:
            raise
        listing = None
    if listing is not None and any(p.shape == "remote-tier" for p in listing.partitions):
        raise CompactlogError(f"{listing.bucket.url}: a broker's remote tier is compacted by its broker "
                              f"(compactlog.remote.compaction.enable); offline, only a copied data dir is")
    doc, etag = B.read_switch(root)
    generation = (doc["generation"] if doc else 0) + 1
    base = root.prefix.rstrip("/")
    out_prefix = f"{base + '.' if base else ''}compactlog-{generation:06d}-{keys.new_uuid()[:8]}/"
    parent = tempfile.mkdtemp(prefix="compactlog-bucket-")
    shadow = os.path.join(parent, "data")
    os.makedirs(shadow)
    gen = None
    try:
        read_config = listing.bucket.config if listing is not None else root.config
        store = root.store

        def get_range(key: str, start: int, end: int) -> bytes:
            try:
                return store.get_range(key, start, end)
            except ObjectNotFound:
                raise StorageError(f"{root.url_of(key)}: the object is gone (the bucket changed after it was "
                                   f"listed)") from None
        with object_body.activate(get_range):
            fetched = build_shadow(listing, shadow) if listing is not None else {}
            gen = ShadowGeneration(root, listing, shadow, fetched, etag, generation, out_prefix)
            yield gen
    finally:
        shutil.rmtree(parent, ignore_errors=True)
        if gen is None or not gen.published:
            try:
                root.store.delete_many([m.key for m in root.store.list(out_prefix)])
            except Exception:   # noqa: BLE001 - a killed generation is swept by the next run's switch
                pass


def sweep_generations(root, keep: set) -> int:
    """Delete the objects of this prefix's generations other than ``keep`` (the one just switched
    to and the one it was cleaned from, which readers that resolved the switch before may still
    be reading): older generations, and those of cleans killed before their switch. Only keys of
    the generation form ``<prefix>.compactlog-<6 digits>-<8 id chars>/`` are touched; the
    objects the first clean read (``<prefix>/``) are never among them."""
    from .bucket import generation_form
    base = root.prefix.rstrip("/")
    head = f"{base}.compactlog-" if base else "compactlog-"
    form = generation_form(root.prefix)
    doomed = []
    for meta in root.store.list(head):
        m = form.match(meta.key)
        if m and m.group(0) not in keep:
            doomed.append(meta.key)
    root.store.delete_many(doomed)
    return len(doomed)


__all__ = ["ShadowDirSource", "ObjectReplacement", "ShadowGeneration", "build_shadow", "file_digest",
           "shadow_generation", "sweep_generations"]
