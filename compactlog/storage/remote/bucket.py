"""A bucket read as a data dir, with no broker and no local copy: ``s3://bucket/prefix`` (or
``file:///dir`` for the local-directory store) where the offline commands and the ``kafka-log``
Spark source take a data dir.

Two shapes may sit under the prefix, told apart by their keys (one LIST of the prefix):

* (a) a Kafka data dir copied to a bucket (``aws s3 sync DATADIR s3://bucket/prefix``): keys
  ``<prefix>/<topic>-<N>/<20 digits>.log`` with ``.index``/``.timeindex``/``.txnindex``,
  ``.snapshot`` files and the data dir's checkpoints at ``<prefix>/``. Read by ``KafkaDirObjects``,
  a ``SegmentSource`` that follows Kafka's ``LocalLog`` naming, one object per file;
* (b) a compactlog broker's remote tier (``rsm.config.key.prefix`` = the URL's prefix): keys
  ``<prefix>/<topic>-<topicId>/<N>/compactlog-partition.json`` (the partition manifest) and the
  segment objects it names (Aiven's layout, ``keys.py``). Read by the remote tier's own source
  (``source.RemoteSegmentSource``) over the manifest as stored, the log start taken from it.

Reads use GET, HEAD and LIST only, by byte range where a reader needs part of a segment (the
readers' ``read_range``); nothing is copied to local disk. A source is plain data (its listing
taken once, its store reopened from its settings in whichever process unpickles it), so a Spark
task reads the objects directly.

The store's settings: the URL names the bucket (or the directory) and the key prefix; the rest is
Aiven's ``rsm.config.storage.*`` names given as ``--override`` (endpoint, region, path style,
static keys, timeouts), else the standard AWS environment (``AWS_ENDPOINT_URL_S3`` /
``AWS_ENDPOINT_URL``, ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, and the credential chain the store
already follows: ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, profiles).
Kafka has no counterpart: its tools read a local directory only.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Mapping
from urllib.parse import unquote, urlsplit

from ...errors import ConfigError, CorruptRecordError, StorageError
from .. import files
from ..segment_source import ObjectPin, SegmentEntry, SegmentSource
from . import keys
from .source import RemoteSegmentSource
from .store import ObjectNotFound, RangeNotSatisfiable, RemoteStorageError, StoreConfig, check_endpoint
from .tiered_read import shared_store

SCHEMES = ("s3://", "file://")
TOPICS_FILE = "compactlog.topics.json"
DELETING = "deleting"            # its topics being deleted (storage.datadir.DELETING)
_STORE = "rsm.config.storage."


def is_bucket_url(where) -> bool:
    """Whether a data-dir argument names a bucket (``s3://`` or ``file://``) rather than a path."""
    return isinstance(where, str) and where.lower().startswith(SCHEMES)


@dataclass(frozen=True)
class Bucket:
    """A bucket URL resolved: the store's settings (``key_prefix``: the URL's prefix, ``/``-ended
    or empty) and the URL as given, for messages."""
    config: StoreConfig
    url: str

    @property
    def prefix(self) -> str:
        return self.config.key_prefix

    @property
    def store(self):
        return shared_store(self.config)

    def url_of(self, key: str) -> str:
        """The URL of one object (what errors and ``location`` name)."""
        if self.config.backend == "s3":
            return f"s3://{self.config.bucket}/{key}"
        return f"file://{os.path.join(self.config.root, key)}"


# the store settings of this command (``--override rsm.config.…``), for the sources it opens by URL
_command_settings: dict[str, str] = {}


def use_settings(overrides: Mapping[str, str]) -> None:
    """The store settings every bucket URL of this process is opened with (a CLI command's
    ``--override`` values of Aiven's names); Spark's Python workers, other processes, take theirs
    from the environment."""
    _command_settings.clear()
    _command_settings.update({k: v for k, v in overrides.items()
                              if k.startswith("rsm.config.") or k.startswith("compactlog.remote.")})


def parse_bucket_url(url: str, overrides: Mapping[str, str] | None = None,
                     environ: Mapping[str, str] | None = None) -> Bucket:
    """``s3://bucket[/prefix]`` or ``file:///dir`` with the store settings of ``overrides``
    (Aiven's names; default: ``use_settings``') and of the AWS environment; a ConfigError naming
    what is wrong otherwise."""
    env = os.environ if environ is None else environ
    overrides = _command_settings if overrides is None else overrides
    props = {k: v for k, v in overrides.items()
             if k.startswith("rsm.config.") or k.startswith("compactlog.remote.")}
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if "@" in parts.netloc:
        # keys written into the URL (s3://KEY:SECRET@bucket, as some tools take them): refused,
        # and the URL named without them, as every later message would have echoed them
        shown = f"{parts.scheme}://***@{parts.netloc.rpartition('@')[2]}{parts.path}"
        raise ConfigError(f"{shown}: a bucket URL carries no credentials (they were not echoed); give them as "
                          f"AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or --override "
                          f"{_STORE}aws.access.key.id=... and {_STORE}aws.secret.access.key=... "
                          f"(expected s3://BUCKET[/PREFIX] or file:///DIR)")
    if scheme == "s3":
        if not parts.netloc:
            raise ConfigError(f"{url}: no bucket name (expected s3://BUCKET[/PREFIX])")
        if parts.query or parts.fragment:
            raise ConfigError(f"{url}: a bucket URL takes no query or fragment (expected s3://BUCKET[/PREFIX])")
        name = parts.netloc
        if not re.fullmatch(r"[a-z0-9][a-z0-9.\-_]{1,254}", name):
            raise ConfigError(f"{url}: {name!r} is not a valid bucket name")
        prefix = unquote(parts.path).strip("/")
        if "//" in prefix or any(p in (".", "..") for p in prefix.split("/") if prefix):
            raise ConfigError(f"{url}: the prefix {prefix!r} has an empty, '.' or '..' part")
        props[_STORE + "backend.class"] = "s3"
        props[_STORE + "s3.bucket.name"] = name
        endpoint_var = "AWS_ENDPOINT_URL_S3" if env.get("AWS_ENDPOINT_URL_S3") else "AWS_ENDPOINT_URL"
        endpoint = env.get(endpoint_var)
        if endpoint and _STORE + "s3.endpoint.url" not in props:
            check_endpoint(endpoint.strip(), endpoint_var)
            props[_STORE + "s3.endpoint.url"] = endpoint
            # an S3-compatible endpoint (MinIO, moto, Ceph) answers path-style requests; AWS does too
            props.setdefault(_STORE + "s3.path.style.access.enabled", "true")
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        if region:
            props.setdefault(_STORE + "s3.region", region)
        # static keys of the environment travel with the settings: a Spark task unpickles them in
        # an executor whose environment may not have them (the JVM's was fixed when it started)
        if _STORE + "aws.access.key.id" not in props and env.get("AWS_ACCESS_KEY_ID") and env.get("AWS_SECRET_ACCESS_KEY"):
            props[_STORE + "aws.access.key.id"] = env["AWS_ACCESS_KEY_ID"]
            props[_STORE + "aws.secret.access.key"] = env["AWS_SECRET_ACCESS_KEY"]
            if env.get("AWS_SESSION_TOKEN"):
                props[_STORE + "aws.session.token"] = env["AWS_SESSION_TOKEN"]
    elif scheme == "file":
        if parts.netloc not in ("", "localhost"):
            raise ConfigError(f"{url}: a file URL names a local directory (file:///DIR), not host {parts.netloc!r}")
        path = unquote(parts.path)
        if not path.startswith("/"):
            raise ConfigError(f"{url}: expected an absolute directory (file:///DIR)")
        path = os.path.normpath(path)
        if not os.path.isdir(path):
            raise ConfigError(f"{url}: no such directory")
        # the store's root is DIR's parent and DIR the key prefix, as s3://BUCKET/PREFIX: a clean's
        # generation and switch go beside DIR (DIR.compactlog-<n>-<id>/), never inside it, where a
        # directory not named <topic>-<partition> stops a Kafka broker starting on the log dir
        parent, name = os.path.split(path)
        props[_STORE + "backend.class"] = "filesystem"
        props[_STORE + "root"] = parent if name else "/"
        prefix = name
    else:
        raise ConfigError(f"{url}: unsupported scheme {parts.scheme!r} (a bucket is s3://BUCKET[/PREFIX] or "
                          f"file:///DIR)")
    props["rsm.config.key.prefix"] = f"{prefix}/" if prefix else ""
    config = StoreConfig.from_properties(props)
    return Bucket(config, url)


# -- what is in the bucket ------------------------------------------------------------------------

_SEGMENT_FILE = re.compile(r"^(\d{20})(\.log|\.index|\.timeindex|\.txnindex|\.snapshot)$")
_MANIFEST = re.compile(r"^(.+)-([A-Za-z0-9_-]{22})/(\d+)/" + re.escape(keys.PARTITION_MANIFEST) + "$")


@dataclass(frozen=True)
class BucketPartition:
    """One partition found in a bucket: its shape (``kafka-dir`` or ``remote-tier``) and where."""
    topic: str
    partition: int
    shape: str
    url: str                    # the partition's own URL: <bucket url>/<topic>-<N> or …/<topic>-<id>/<N>
    topic_id: str | None = None


@dataclass(frozen=True)
class BucketListing:
    """The prefix listed once: the partitions of either shape, and the data dir's own files."""
    bucket: Bucket
    partitions: tuple[BucketPartition, ...]
    objects: Mapping[str, tuple[int, str | None]] = field(repr=False, default_factory=dict)   # key -> (size, etag)

    def root_names(self) -> frozenset:
        """Which of Kafka's data-dir files (``ROOT_FILES``) are directly under the prefix."""
        p = self.bucket.prefix
        return frozenset(name for name in ROOT_FILES if p + name in self.objects)

    def topics(self) -> list[str]:
        return sorted({p.topic for p in self.partitions})

    def topic_configs(self) -> dict[str, dict[str, str]]:
        """topic -> its configs, when compactlog's topics file was copied along (a Kafka data dir
        has none: Kafka keeps topic configs in its metadata log); one GET."""
        key = self.bucket.prefix + TOPICS_FILE
        if key not in self.objects:
            return {}
        import json
        try:
            meta = json.loads(self.bucket.store.get(key).data)
            return {t: dict(m.get("configs", {})) for t, m in meta.get("topics", {}).items()}
        except (ValueError, AttributeError, TypeError, RemoteStorageError):
            return {}


# -- the cleaned generations of a copied data dir (``compactlog clean`` over a bucket) -------------
#
# A clean never writes under the prefix it read: S3 has no rename, and the copy is the user's. It
# writes the cleaned data dir, whole, under a new sibling prefix ``<prefix>.compactlog-<n>-<id>/``
# (create-only PUTs), then switches ``<prefix>.compactlog-clean.json`` to it by one conditional PUT
# (create-only the first time, If-Match on the ETag it read before the run after that): the
# commit point. A reader of ``<prefix>`` reads the generation the switch names; before the switch
# (a clean killed at any step) it reads what was there. The prefix a Kafka user syncs back is the
# switch's ``current``.

SWITCH_SUFFIX = ".compactlog-clean.json"
SWITCH_VERSION = 1


def switch_key(prefix: str) -> str:
    base = prefix.rstrip("/")
    return f"{base}{SWITCH_SUFFIX}" if base else SWITCH_SUFFIX.lstrip(".")


def read_switch(bucket: Bucket) -> tuple[dict | None, str | None]:
    """The switch of ``bucket``'s prefix and its ETag, (None, None) when none was written."""
    import json
    try:
        got = bucket.store.get(switch_key(bucket.prefix))
    except ObjectNotFound:
        return None, None
    where = bucket.url_of(switch_key(bucket.prefix))
    try:
        doc = json.loads(got.data)
        if not isinstance(doc.get("current"), str) or not isinstance(doc.get("generation"), int):
            raise ValueError("no current generation")
    except (ValueError, AttributeError) as e:
        raise StorageError(f"{where}: not a compactlog clean switch ({e})") from None
    # a newer writer may mean something else by the same fields: not read (nor replaced by
    # ``clean``, which would write this version's document over it) rather than guessed at
    if doc.get("version") != SWITCH_VERSION:
        raise StorageError(f"{where}: a clean switch of version {doc.get('version')!r}; this compactlog reads "
                           f"version {SWITCH_VERSION} (a newer compactlog wrote it?)")
    # only ``clean`` writes it, always naming a generation of this prefix: anything else would
    # send every reader (and the next clean's sweep) to some other prefix of the bucket
    if not generation_form(bucket.prefix).fullmatch(doc["current"]):
        raise StorageError(f"{where}: its current prefix {doc['current']!r} is not a generation of "
                           f"{bucket.url} (<prefix>.compactlog-<6 digits>-<8 characters>/)")
    return doc, got.etag


def generation_form(prefix: str) -> "re.Pattern":
    """The key prefix of a cleaned generation of ``prefix`` (``bucket_clean`` writes them)."""
    base = prefix.rstrip("/")
    head = f"{base}.compactlog-" if base else "compactlog-"
    return re.compile(re.escape(head) + r"\d{6}-[A-Za-z0-9_-]{8}/")


def current(bucket: Bucket) -> Bucket:
    """The bucket a reader of ``bucket`` reads: the generation its switch names, or itself."""
    doc, _ = read_switch(bucket)
    if doc is None:
        return bucket
    from dataclasses import replace
    config = replace(bucket.config, key_prefix=doc["current"])
    return Bucket(config, Bucket(config, "").url_of(doc["current"].rstrip("/")))


def list_bucket(bucket: Bucket, *, follow_switch: bool = True) -> BucketListing:
    """One LIST of the prefix (of the cleaned generation its switch names, if any), sorted into
    partitions; a StorageError when it holds none, naming what is there instead."""
    try:
        if follow_switch:
            bucket = current(bucket)
        metas = bucket.store.list(bucket.prefix)
    except RemoteStorageError as e:
        raise StorageError(f"{bucket.url}: {e}") from None
    objects = {m.key: (m.size, m.etag) for m in metas}
    found: dict[tuple[str, int], BucketPartition] = {}
    base = bucket.url.rstrip("/")
    for key in objects:
        rel = key[len(bucket.prefix):]
        m = _MANIFEST.match(rel)
        if m:
            topic, topic_id, p = m.group(1), m.group(2), int(m.group(3))
            other = found.get((topic, p))
            if other is not None and other.topic_id != topic_id:
                # two incarnations of the topic (a deleted one's leftovers, or two clusters on one
                # prefix): which is live is the broker's metadata, which a bucket reader has not
                raise StorageError(f"{bucket.url}: {topic}-{p} has two remote tiers, topic ids {other.topic_id} "
                                   f"and {topic_id} (a deleted topic's leftovers, or two clusters on one "
                                   f"prefix?); read one by its partition URL, {other.url} or "
                                   f"{base}/{topic}-{topic_id}/{p}")
            found[(topic, p)] = BucketPartition(topic, p, "remote-tier", f"{base}/{topic}-{topic_id}/{p}", topic_id)
            continue
        head, _, name = rel.rpartition("/")
        if "/" in head or not head or not _SEGMENT_FILE.match(name) or not files.is_partition_dir(head):
            continue
        topic, p = files.parse_partition_dir(head)
        found.setdefault((topic, p), BucketPartition(topic, p, "kafka-dir", f"{base}/{head}"))
    if not found:
        what = f"{len(objects)} object(s), none a segment of a Kafka data dir or a remote tier's manifest" \
            if objects else "no objects"
        raise StorageError(f"{bucket.url}: no partitions found ({what})")
    shapes = {p.shape for p in found.values()}
    if len(shapes) > 1:
        raise StorageError(f"{bucket.url}: holds both a copied Kafka data dir and a remote tier; name one "
                           f"prefix of the two")
    if shapes == {"kafka-dir"} and bucket.prefix + TOPICS_FILE in objects:
        # a copy of a data dir taken while a topic deletion was under way (or a kill had stopped
        # one after its record): the topic is deleted there, as a DataDir of the copy would say
        gone = _deleting_topics(bucket)
        found = {k: v for k, v in found.items() if k[0] not in gone}
        if not found:
            raise StorageError(f"{bucket.url}: no partitions found (every topic there is being deleted)")
    return BucketListing(bucket, tuple(sorted(found.values(), key=lambda p: (p.topic, p.partition))), objects)


def _deleting_topics(bucket: Bucket) -> frozenset:
    """The topics the copied topics file records as being deleted (``DataDir``'s ``deleting``); one
    GET. Empty when the file cannot be read (nothing is guessed gone)."""
    import json
    try:
        meta = json.loads(bucket.store.get(bucket.prefix + TOPICS_FILE).data)
        deleting = meta.get(DELETING) if isinstance(meta, dict) else None
    except (ValueError, AttributeError, TypeError, RemoteStorageError):
        return frozenset()
    return frozenset(deleting) if isinstance(deleting, dict) else frozenset()


def partition_url_source(url: str, overrides: Mapping[str, str] | None = None) -> SegmentSource:
    """The source of one partition's URL (as ``BucketPartition.url`` names it): the last path part
    (or two) says which partition; its objects are listed (shape a) or its manifest read (shape b)."""
    bucket_url, _, last = url.rstrip("/").rpartition("/")
    if last.isdigit() and "-" in bucket_url.rpartition("/")[2]:       # …/<topic>-<id>/<N>: a remote tier
        root_url, _, topic_dir = bucket_url.rpartition("/")
        topic, _, topic_id = topic_dir.rpartition("-")
        return remote_tier_source(parse_bucket_url(root_url, overrides), topic, topic_id, int(last))
    bucket = parse_bucket_url(bucket_url, overrides)
    try:
        bucket = current(bucket)
    except RemoteStorageError as e:
        raise StorageError(f"{bucket.url}: {e}") from None
    return KafkaDirObjects.open(bucket, last)


def sources(listing: BucketListing) -> list[tuple[BucketPartition, SegmentSource]]:
    """Every partition of the listing with its source (no further LIST for shape a)."""
    root = listing.root_names()
    out = []
    for p in listing.partitions:
        if p.shape == "remote-tier":
            out.append((p, remote_tier_source(listing.bucket, p.topic, p.topic_id, p.partition)))
        else:
            out.append((p, KafkaDirObjects.from_listing(listing.bucket, files.partition_dir_name(p.topic, p.partition),
                                                        listing.objects, root)))
    return out


# -- shape (a): a Kafka data dir's files as objects -----------------------------------------------

@dataclass(frozen=True)
class KafkaDirObjects(SegmentSource):
    """One partition directory of a Kafka data dir copied to a bucket: Kafka's ``LocalLog`` file
    names, one object each. The listing (names, sizes, ETags) is taken once and travels with the
    source; the live segments are the ``<20 digits>.log`` objects (a copy taken mid-clean may also
    hold ``.cleaned``/``.swap``/``.deleted`` files: left out, as Kafka's loader removes or
    finishes them, a ``.swap`` counting as not yet swapped in)."""
    config: StoreConfig
    dir_name: str                               # "<topic>-<N>"
    names: tuple                                # ((file name, size, etag), ...) of the partition's objects
    root: frozenset = frozenset()               # names directly under the prefix

    @classmethod
    def open(cls, bucket: Bucket, dir_name: str) -> "KafkaDirObjects":
        try:
            metas = bucket.store.list(bucket.prefix + dir_name + "/")
            root = _root_names(bucket)
        except RemoteStorageError as e:
            raise StorageError(f"{bucket.url_of(bucket.prefix + dir_name)}: {e}") from None
        head = len(bucket.prefix) + len(dir_name) + 1
        names = tuple((m.key[head:], m.size, m.etag) for m in metas if "/" not in m.key[head:])
        return cls(bucket.config, dir_name, names, frozenset(root))

    @classmethod
    def from_listing(cls, bucket: Bucket, dir_name: str, objects: Mapping, root: frozenset) -> "KafkaDirObjects":
        head = bucket.prefix + dir_name + "/"
        names = tuple((k[len(head):], size, etag) for k, (size, etag) in sorted(objects.items())
                      if k.startswith(head) and "/" not in k[len(head):])
        return cls(bucket.config, dir_name, names, root)

    # -- names
    @property
    def bucket(self) -> Bucket:
        return Bucket(self.config, "")

    def key(self, name: str) -> str:
        return f"{self.config.key_prefix}{self.dir_name}/{name}"

    def _sizes(self) -> dict:
        d = self.__dict__.get("_by_name")
        if d is None:
            d = {n: (s, e) for n, s, e in self.names}
            object.__setattr__(self, "_by_name", d)
        return d

    def location(self, base_offset: int | None = None, suffix: str = files.LOG_SUFFIX) -> str:
        if base_offset is None:
            return self.bucket.url_of(self.config.key_prefix + self.dir_name)
        return self.bucket.url_of(self.key(files.filename_prefix(base_offset) + suffix))

    def __str__(self) -> str:
        return self.location()

    def __getstate__(self):
        return {k: getattr(self, k) for k in ("config", "dir_name", "names", "root")}

    def __setstate__(self, state):
        for k, v in state.items():
            object.__setattr__(self, k, v)

    def exists(self) -> bool:
        return bool(self.names)

    # -- listing and reading
    def list_segments(self) -> list[SegmentEntry]:
        by_name = self._sizes()
        out = []
        for name, size, etag in self.names:
            m = _SEGMENT_FILE.match(name)
            if not m or m.group(2) != files.LOG_SUFFIX:
                continue
            stem = m.group(1)
            present = frozenset(s for s in files.SEGMENT_SUFFIXES if stem + s in by_name)
            out.append(SegmentEntry(int(stem), size, present, ("object", name, etag)))
        return sorted(out, key=lambda e: e.base_offset)

    def _get_range(self, name: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        key = self.key(name)
        try:
            return self.bucket.store.get_range(key, start, end)
        except RangeNotSatisfiable:
            return b""
        except ObjectNotFound:
            raise StorageError(f"{self.bucket.url_of(key)}: the object is gone (the bucket changed after it "
                               f"was listed)") from None

    def read_segment(self, base_offset: int, size: int):
        if size == 0:
            return b""
        data = self._get_range(files.filename_prefix(base_offset) + files.LOG_SUFFIX, 0, size)
        if len(data) < size:
            raise CorruptRecordError(f"segment object holds {len(data)} bytes, it was listed with {size}",
                                     file=self.location(base_offset))
        return data

    def read_range(self, base_offset: int, start: int, end: int, suffix: str = files.LOG_SUFFIX) -> bytes:
        return self._get_range(files.filename_prefix(base_offset) + suffix, start, end)

    def read_index(self, base_offset: int, suffix: str) -> bytes | None:
        name = files.filename_prefix(base_offset) + suffix
        got = self._sizes().get(name)
        if got is None:
            return None
        return self._get_range(name, 0, got[0]) if got[0] else b""

    def pin(self):
        return ObjectPin(self, self.list_segments())

    def checkpoint(self, name: str) -> dict[tuple[str, int], int]:
        """One of the data dir's offset checkpoints (``ROOT_FILES``), {} when there is none."""
        if name not in self.root:
            return {}
        try:
            return parse_offset_checkpoint(self.bucket.store.get(self.config.key_prefix + name).data)
        except ObjectNotFound:
            return {}

    def log_start_checkpoint(self) -> int | None:
        return self.checkpoint(files.LOG_START_OFFSET_CHECKPOINT).get(files.parse_partition_dir(self.dir_name))

    def clean_shutdown(self) -> bool:
        return files.CLEAN_SHUTDOWN_FILE in self.root

    def producer_snapshot_offsets(self) -> list[int]:
        n = len(files.SNAPSHOT_SUFFIX)
        return sorted(int(name[:-n]) for name, _, _ in self.names
                      if name.endswith(files.SNAPSHOT_SUFFIX) and name[:-n].isdecimal())

    def producer_snapshot(self, offset: int) -> bytes:
        name = files.filename_prefix(offset) + files.SNAPSHOT_SUFFIX
        try:
            return self.bucket.store.get(self.key(name)).data
        except ObjectNotFound:
            raise FileNotFoundError(self.location(offset, files.SNAPSHOT_SUFFIX)) from None

    # -- replacing: ``bucket_clean`` writes a cleaned copy under a new prefix, never here
    def create_replacement(self, base_offset: int, members=None):
        raise StorageError(f"{self.location()}: a copied data dir in a bucket is read-only here; "
                           f"`compactlog clean` writes its cleaned copy under a new prefix")

    def discard_replacements(self) -> None:
        pass

    def commit_swap(self, groups, log=None, staged=None) -> None:
        self.create_replacement(0)


# the files of a Kafka data dir's root a reader of its partitions consults
ROOT_FILES = (files.LOG_START_OFFSET_CHECKPOINT, files.CLEANER_CHECKPOINT, files.RECOVERY_POINT_CHECKPOINT,
              files.CLEAN_SHUTDOWN_FILE)


def _root_names(bucket: Bucket) -> set:
    """Which of ``ROOT_FILES`` are there: a LIST of the prefix would list every partition's
    objects, so the few names are asked for by HEAD."""
    out = set()
    for name in ROOT_FILES:
        try:
            bucket.store.head(bucket.prefix + name)
            out.add(name)
        except ObjectNotFound:
            pass
    return out


def parse_offset_checkpoint(data: bytes) -> dict[tuple[str, int], int]:
    """Kafka's ``topic partition offset`` checkpoint (version 0) from its bytes; {} if unreadable."""
    lines = data.decode("utf-8", "replace").split("\n")
    out = {}
    if len(lines) < 2 or lines[0].strip() != "0":
        return out
    for line in lines[2:]:
        tokens = line.split()
        if len(tokens) == 3 and tokens[1].isdigit():
            try:
                out[(tokens[0], int(tokens[1]))] = int(tokens[2])
            except ValueError:
                pass
    return out


class BucketTier:
    """A bucket's remote tier in the shape ``verify.verify_remote_partition`` reads a data dir's
    (``tiered_read.RemoteTier``): no local log, so the local log start is the highest remote
    offset + 1 and the log start the manifest's."""

    def __init__(self, listing: BucketListing):
        from types import SimpleNamespace
        self.bucket = listing.bucket
        self.store, self.config, self.prefix = listing.bucket.store, listing.bucket.config, listing.bucket.prefix
        self.datadir = SimpleNamespace(path=listing.bucket.url.rstrip("/"))
        self.ids = {(p.topic, p.partition): p.topic_id for p in listing.partitions if p.shape == "remote-tier"}

    def tiers(self, topic: str, partition: int):
        from .tiered_read import PartitionTiers, read_partition_manifest
        topic_id = self.ids.get((topic, partition))
        if topic_id is None:
            return None
        m = read_partition_manifest(self.store, self.prefix, topic, topic_id, partition)
        if m is None:
            return None
        return PartitionTiers(topic, partition, topic_id, m, m.log_start_offset, m.highest_offset + 1)


# -- shape (b): a compactlog remote tier ----------------------------------------------------------

def remote_tier_source(bucket: Bucket, topic: str, topic_id: str, partition: int) -> SegmentSource:
    """The partition's remote segments as its manifest lists them now (one GET)."""
    from .tiered_read import read_partition_manifest
    try:
        manifest = read_partition_manifest(bucket.store, bucket.prefix, topic, topic_id, partition)
    except RemoteStorageError as e:
        raise StorageError(f"{bucket.url}: {e}") from None
    if manifest is None:
        raise StorageError(f"{bucket.url}: {topic}-{partition} has no partition manifest "
                           f"({keys.partition_manifest_key(bucket.prefix, topic, topic_id, partition)})")
    return ManifestSource(bucket.config, topic, topic_id, partition, manifest)


@dataclass(frozen=True, eq=False)
class ManifestSource(RemoteSegmentSource):
    """A remote tier's partition read alone (no local tail): the segments of one manifest
    generation, the log start the manifest's (Kafka's logStartOffset as the broker last set it).
    Equal (and hashed) by partition and generation: readers key their state by source."""

    def log_start_checkpoint(self) -> int | None:
        return self.manifest.log_start_offset

    def __hash__(self):
        return hash((self.store_config, self.topic_id, self.partition, self.manifest.generation))

    def __eq__(self, other):
        return (type(other) is type(self) and self.store_config == other.store_config
                and self.topic_id == other.topic_id and self.partition == other.partition
                and self.manifest.generation == other.manifest.generation)


__all__ = ["Bucket", "BucketListing", "BucketPartition", "KafkaDirObjects", "ManifestSource", "is_bucket_url",
           "list_bucket", "parse_bucket_url", "partition_url_source", "remote_tier_source", "sources"]
