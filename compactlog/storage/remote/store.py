"""The object store under the remote tier: a narrow interface, on S3 (obstore) or a local directory.

Follows Kafka's ``RemoteStorageManager`` contract (objects written once, read whole or by byte
range, deleted idempotently; failures surfaced as ``RemoteStorageException``, which a broker answers
with UNKNOWN_SERVER_ERROR, ``Errors.forException``) and, for the local store, Kafka's test RSM
``LocalTieredStorage`` (a directory tree under one root). Beyond Kafka's contract the store offers
the two conditional writes compactlog's atomicity rests on (tiered-storage.md §3.4), since S3 has
no rename:

* ``put_if_absent``: create-only (S3 ``If-None-Match: *``; locally ``link(2)`` of a written,
  fsync'd temporary file, which fails if the name exists);
* ``put_if_match``: compare-and-swap on the ETag (S3 ``If-Match``; locally an ``flock`` on the
  directory, a compare, then ``rename(2)`` of a fsync'd temporary file).

Both raise ``PreconditionFailed`` when the condition does not hold. Errors are four classes (plus
their base) that later map to Kafka's codes: ``ObjectNotFound`` (404), ``PreconditionFailed``
(412), ``StoreUnavailable`` (connection refused, timeouts, 5xx, a torn response, 409
ConditionalRequestConflict: retry later) and ``AccessDenied`` (401/403).

Settings carry the names of Aiven's open-source RSM (``docs/configs.rst``), so a Kafka
``server.properties`` carries over: ``rsm.config.storage.backend.class`` (Aiven's S3 or filesystem
class), ``rsm.config.storage.s3.bucket.name``, ``…s3.region``, ``…s3.endpoint.url``,
``…s3.path.style.access.enabled``, ``…aws.access.key.id``, ``…aws.secret.access.key``,
``…aws.session.token``, ``…aws.certificate.check.enabled``, ``…s3.api.call.timeout`` and
``…s3.api.call.attempt.timeout`` (ms), ``…s3.multipart.upload.part.size``, ``…root`` (filesystem),
``rsm.config.key.prefix``, ``rsm.config.chunk.size``; compactlog's own
``compactlog.remote.store.max.retries`` (obstore's retries per request, its default 10) and
``compactlog.remote.multipart.threshold.bytes``. Without static keys the standard AWS chain
applies (``AWS_*`` environment variables, web identity, container and instance credentials,
and, where boto3 is installed, profiles of ``~/.aws``). Secrets never appear in a ``repr``.

Multipart (objects of ``compactlog.remote.multipart.threshold.bytes`` and more, 64 MiB by default,
parts of ``…s3.multipart.upload.part.size``): obstore aborts the upload when a part or the
completion fails. obstore 0.12 sends no condition with CompleteMultipartUpload (its create mode
forces a single PUT), so a multipart create checks absence with HEAD first and relies on the
key's fresh segment UUID (§3.4 rule 1) for uniqueness; single-PUT objects (everything below the
threshold: indexes, manifests, the partition manifest) carry the real ``If-None-Match``. (The spec,
§9.2, says obstore honours the condition on multipart uploads; obstore 0.12.1's ``put`` documents
and does otherwise - a ``mode="create"`` put of 12 MiB with ``use_multipart=True`` against moto
came back with a single-part ETag - so the code follows the library.)
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import uuid
from dataclasses import dataclass, field
from datetime import timedelta
from typing import BinaryIO, Iterable, Mapping, Sequence

from ...errors import CompactlogError, ConfigError
from ..fsutil import fsync_dir

MiB = 1 << 20

S3_BACKEND_CLASS = "io.aiven.kafka.tieredstorage.storage.s3.S3Storage"
FILESYSTEM_BACKEND_CLASS = "io.aiven.kafka.tieredstorage.storage.filesystem.FileSystemStorage"
RSM = "rsm.config."
STORAGE = "rsm.config.storage."


# -- errors -----------------------------------------------------------------------------------------

class RemoteStorageError(CompactlogError):
    """Kafka's ``RemoteStorageException``: not a Kafka ``ApiException``, so a broker answers
    UNKNOWN_SERVER_ERROR (-1) for it (tiered-storage.md §4.5)."""

    kafka_error_name = "unknown_server_error"

    def __init__(self, message: str, *, key: str | None = None):
        self.key = key
        super().__init__(message)


class ObjectNotFound(RemoteStorageError):
    """The key does not exist (404; Kafka's ``RemoteResourceNotFoundException``)."""


class PreconditionFailed(RemoteStorageError):
    """A conditional write lost: the key exists (create-only) or its ETag changed (CAS) (412)."""


class StoreUnavailable(RemoteStorageError):
    """The store cannot be reached or failed on its side (connection refused, timeout, 5xx, a
    response cut short, 409 ConditionalRequestConflict): nothing is known to have changed;
    retry later."""


class AccessDenied(RemoteStorageError):
    """The credentials are refused or lack a permission (401/403)."""


class RangeNotSatisfiable(RemoteStorageError):
    """A byte range starting at or past the object's end (416)."""


# -- values -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ObjectMeta:
    key: str
    size: int
    etag: str | None
    last_modified_ms: int | None = None


@dataclass(frozen=True)
class StoredObject:
    data: bytes
    etag: str | None


# -- settings ---------------------------------------------------------------------------------------

_SECRETS = ("access_key_id", "secret_access_key", "session_token")


@dataclass(frozen=True)
class StoreConfig:
    """The store settings (see the module docstring for their names). ``repr`` hides secrets."""

    backend: str = "s3"                     # "s3" | "filesystem"
    bucket: str | None = None
    region: str | None = None
    endpoint_url: str | None = None
    path_style: bool | None = None
    access_key_id: str | None = field(default=None, repr=False)
    secret_access_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)
    certificate_check: bool = True
    api_call_timeout_ms: int | None = None
    attempt_timeout_ms: int | None = None
    max_retries: int | None = None
    root: str | None = None
    key_prefix: str = ""
    chunk_size: int = 4 * MiB
    multipart_part_size: int = 25 * MiB           # Aiven's s3.multipart.upload.part.size default
    multipart_threshold: int = 64 * MiB           # tiered-storage.md §3.4 rule 2

    def __repr__(self) -> str:
        shown = [f"{k}={getattr(self, k)!r}" for k in self.__dataclass_fields__ if k not in _SECRETS]
        shown += [f"{k}='[hidden]'" for k in _SECRETS if getattr(self, k) is not None]
        return f"StoreConfig({', '.join(shown)})"

    __str__ = __repr__

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> "StoreConfig":
        """The settings from broker properties; a bad value is a ConfigError naming the setting."""
        def get(name: str) -> str | None:
            v = props.get(name)
            return None if v is None or str(v).strip() == "" else str(v).strip()

        def boolean(name: str, default: bool | None) -> bool | None:
            v = get(name)
            if v is None:
                return default
            if v.lower() not in ("true", "false"):
                raise ConfigError(f"{name}: expected true or false, found {v!r}")
            return v.lower() == "true"

        def integer(name: str, default: int | None, low: int, high: int = 2**63 - 1) -> int | None:
            v = get(name)
            if v is None:
                return default
            try:
                n = int(v)
            except ValueError:
                raise ConfigError(f"{name}: expected an integer, found {v!r}") from None
            if not low <= n <= high:
                raise ConfigError(f"{name}: {n} is outside [{low}, {high}]")
            return n

        cls_name = get(STORAGE + "backend.class") or S3_BACKEND_CLASS
        if cls_name == S3_BACKEND_CLASS or cls_name.lower() == "s3":
            backend = "s3"
        elif cls_name == FILESYSTEM_BACKEND_CLASS or cls_name.lower() == "filesystem":
            backend = "filesystem"
        else:
            raise ConfigError(f"{STORAGE}backend.class: {cls_name!r} is not supported (use {S3_BACKEND_CLASS} "
                              f"or {FILESYSTEM_BACKEND_CLASS})")
        if boolean(RSM + "encryption.enabled", False):
            raise ConfigError(f"{RSM}encryption.enabled=true is not supported: compactlog reads and writes "
                              f"segment objects unencrypted")
        prefix = props.get(RSM + "key.prefix") or ""
        config = cls(
            backend=backend,
            bucket=get(STORAGE + "s3.bucket.name"),
            region=get(STORAGE + "s3.region"),
            endpoint_url=check_endpoint(get(STORAGE + "s3.endpoint.url"), STORAGE + "s3.endpoint.url"),
            path_style=boolean(STORAGE + "s3.path.style.access.enabled", None),
            access_key_id=get(STORAGE + "aws.access.key.id"),
            secret_access_key=get(STORAGE + "aws.secret.access.key"),
            session_token=get(STORAGE + "aws.session.token"),
            certificate_check=boolean(STORAGE + "aws.certificate.check.enabled", True),
            api_call_timeout_ms=integer(STORAGE + "s3.api.call.timeout", None, 1),
            attempt_timeout_ms=integer(STORAGE + "s3.api.call.attempt.timeout", None, 1),
            max_retries=integer("compactlog.remote.store.max.retries", None, 0, 100),
            root=get(STORAGE + "root"),
            key_prefix=prefix,
            chunk_size=integer(RSM + "chunk.size", 4 * MiB, 1, 1073741823),
            multipart_part_size=integer(STORAGE + "s3.multipart.upload.part.size", 25 * MiB, 5 * MiB, 2147483639),
            multipart_threshold=integer("compactlog.remote.multipart.threshold.bytes", 64 * MiB, 5 * MiB),
        )
        if backend == "s3" and not config.bucket:
            raise ConfigError(f"{STORAGE}s3.bucket.name is required for the S3 store")
        if backend == "s3" and "/" in config.bucket:
            raise ConfigError(f"{STORAGE}s3.bucket.name: {config.bucket!r} is not a bucket name; a key prefix goes in "
                              f"rsm.config.key.prefix")
        # S3's rules, loosely (its legacy names: upper case and '_' allowed, up to 255): a name
        # no S3 API takes is refused here, not by every upload failing after the broker started
        if backend == "s3" and not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{1,254}", config.bucket):
            raise ConfigError(f"{STORAGE}s3.bucket.name: {config.bucket!r} is not a valid bucket name (letters, "
                              f"digits, '.', '-' and '_', 3 to 255 characters)")
        if backend == "s3" and (config.access_key_id is None) != (config.secret_access_key is None):
            raise ConfigError(f"{STORAGE}aws.access.key.id and {STORAGE}aws.secret.access.key go together")
        if prefix:
            # every key is the prefix and more (Aiven's string prefix): one that no key can start
            # with is refused here, not by every upload failing after the broker started
            try:
                _check_key(prefix + "x")
            except ValueError:
                raise ConfigError(f"{RSM}key.prefix: {prefix!r} cannot start an object key (no leading '/', no "
                                  f"empty, '.' or '..' part)") from None
        if backend == "filesystem" and not config.root:
            raise ConfigError(f"{STORAGE}root is required for the filesystem store")
        return config


def check_endpoint(url: str | None, name: str) -> str | None:
    """``url`` if it is an http(s) URL with a host and no user-info; else a ConfigError naming
    ``name`` (the setting or environment variable it came from). Checked here because obstore
    panics (a Rust panic, past ``except Exception``) on a URL it cannot parse at the first request,
    and prints a URL's user-info (where keys are sometimes put) in its error text; the user-info is
    never echoed."""
    if url is None:
        return None
    from urllib.parse import urlsplit
    if "@" in url.partition("://")[2].partition("/")[0]:
        raise ConfigError(f"{name}: an endpoint URL carries no credentials (they were not echoed); set "
                          f"{STORAGE}aws.access.key.id and {STORAGE}aws.secret.access.key, or AWS_ACCESS_KEY_ID "
                          f"and AWS_SECRET_ACCESS_KEY")
    bad = ConfigError(f"{name}: {url!r} is not an endpoint URL (expected http[s]://HOST[:PORT])")
    if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in url):
        raise bad
    try:
        parts = urlsplit(url)
        parts.port                  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise bad from None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise bad
    return url


def open_store(config: StoreConfig | Mapping[str, str]) -> "ObjectStore":
    """The store the settings describe."""
    if not isinstance(config, StoreConfig):
        config = StoreConfig.from_properties(config)
    if config.backend == "filesystem":
        return LocalDirectoryStore(config.root, config)
    return S3ObjectStore(config)


# -- the interface ----------------------------------------------------------------------------------

def _check_key(key: str) -> str:
    if not key or key.startswith("/") or key.endswith("/") or "//" in key:
        raise ValueError(f"invalid object key {key!r}")
    if any(part in (".", "..") for part in key.split("/")):
        raise ValueError(f"invalid object key {key!r}: '.' and '..' are not key parts")
    return key


class ObjectStore:
    """What the remote tier needs of a store (see the module docstring). Thread-safe."""

    config: StoreConfig

    def put_if_absent(self, key: str, data: bytes | memoryview | BinaryIO, size: int | None = None) -> str:
        """Create ``key`` (its ETag); PreconditionFailed if it exists. ``data``: bytes, or a binary
        file positioned at the start with ``size`` bytes to send."""
        raise NotImplementedError

    def put_if_match(self, key: str, data: bytes, etag: str) -> str:
        """Replace ``key`` if its ETag is still ``etag`` (the new ETag); PreconditionFailed if it
        changed, ObjectNotFound-or-PreconditionFailed if it is gone."""
        raise NotImplementedError

    def get(self, key: str) -> StoredObject:
        raise NotImplementedError

    def get_range(self, key: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``, fewer at the object's end; RangeNotSatisfiable if ``start`` is at
        or past the end of a non-empty object."""
        raise NotImplementedError

    def get_ranges(self, key: str, ranges: Sequence[tuple[int, int]]) -> list[bytes]:
        return [self.get_range(key, s, e) for s, e in ranges]

    def head(self, key: str) -> ObjectMeta:
        raise NotImplementedError

    def list(self, prefix: str) -> list[ObjectMeta]:
        """Every object whose key starts with ``prefix`` (a string prefix), sorted by key."""
        raise NotImplementedError

    def delete(self, key: str) -> None:
        """Delete ``key``; a missing key is success (the RSM contract wants deletes idempotent)."""
        raise NotImplementedError

    def delete_many(self, keys: Iterable[str]) -> None:
        for key in keys:
            self.delete(key)

    def copy(self, src: str, dst: str) -> None:
        """``dst`` made a copy of ``src`` inside the store (S3's CopyObject: no bytes through this
        process). ``dst`` is a key nobody else writes (a fresh generation's), so no condition."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


# -- S3 through obstore -----------------------------------------------------------------------------

def _s3_error(e: BaseException, key: str | None, op: str) -> RemoteStorageError:
    """One obstore exception as one of ours, with a one-line message that names the key."""
    from obstore import exceptions as ox
    text = str(e)
    first = text.splitlines()[0] if text else type(e).__name__
    status = re.search(r"status code: (\d{3})", text)
    code = int(status.group(1)) if status else None
    what = f"{op} {key!r}" if key else op
    if "NoSuchBucket" in text:
        return RemoteStorageError(f"{what}: the bucket does not exist", key=key)
    bad_key = re.search(r'Encountered object with invalid path: (?:Error parsing )?Path "([^"]*)"', text)
    if bad_key:
        # a key with an empty or '.' part (``a//b``): obstore cannot list past it. The store is
        # fine, the key is the problem: named (the listing holds only keys under our prefix)
        detail = re.search(r'(contained empty path segment|illegal character sequence "[^"]*")', text)
        return RemoteStorageError(f"{what}: the key {bad_key.group(1)!r} under it cannot be read by this client "
                                  f"({detail.group(1) if detail else 'an invalid path'}); rename or delete it",
                                  key=key)
    if code == 409:         # obstore reads any 409 as AlreadyExists; S3's is ConditionalRequestConflict
        return StoreUnavailable(f"{what}: conflicting concurrent request (409), retry", key=key)
    if isinstance(e, (ox.AlreadyExistsError, ox.PreconditionError)) or code == 412:
        return PreconditionFailed(f"{what}: precondition failed (the object exists or changed)", key=key)
    if isinstance(e, (FileNotFoundError, ox.NotFoundError)) or code == 404:
        return ObjectNotFound(f"{what}: no such object", key=key)
    if isinstance(e, (PermissionError, ox.PermissionDeniedError, ox.UnauthenticatedError)) or code in (401, 403):
        return AccessDenied(f"{what}: access denied: {first[:300]}", key=key)
    if code == 416:
        return RangeNotSatisfiable(f"{what}: range not satisfiable", key=key)
    if code is None or code >= 500 or code == 408 or code == 429:
        reason = "server error" if code else "cannot reach the store"
        return StoreUnavailable(f"{what}: {reason}: {first[:300]}", key=key)
    return RemoteStorageError(f"{what}: {first[:300]}", key=key)


def _etag(value) -> str | None:
    return value if isinstance(value, str) else None


class S3ObjectStore(ObjectStore):
    """The store on S3 (or any S3 API), through obstore."""

    def __init__(self, config: StoreConfig):
        from obstore.store import S3Store
        self.config = config
        kwargs: dict = {}
        if config.region:
            kwargs["region"] = config.region
        if config.endpoint_url:
            kwargs["endpoint"] = config.endpoint_url
        if config.path_style is not None:
            kwargs["virtual_hosted_style_request"] = not config.path_style
        if config.access_key_id is not None:
            kwargs["access_key_id"] = config.access_key_id
            kwargs["secret_access_key"] = config.secret_access_key
            if config.session_token:
                kwargs["token"] = config.session_token
        else:
            provider = _profile_credentials()
            if provider is not None:
                kwargs["credential_provider"] = provider
        client: dict = {}
        if config.endpoint_url and config.endpoint_url.startswith("http://"):
            client["allow_http"] = True
        if not config.certificate_check:
            client["allow_invalid_certificates"] = True
        if config.attempt_timeout_ms:
            client["timeout"] = timedelta(milliseconds=config.attempt_timeout_ms)
            client["connect_timeout"] = timedelta(milliseconds=config.attempt_timeout_ms)
        retry: dict = {}
        if config.api_call_timeout_ms:
            retry["retry_timeout"] = timedelta(milliseconds=config.api_call_timeout_ms)
        if config.max_retries is not None:
            retry["max_retries"] = config.max_retries
        try:
            self._store = S3Store(config.bucket, client_options=client or None, retry_config=retry or None, **kwargs)
        except Exception as e:      # obstore's configuration errors
            raise ConfigError(f"the S3 store settings are refused: {str(e).splitlines()[0]}") from None

    def __repr__(self) -> str:
        return f"S3ObjectStore(bucket={self.config.bucket!r}, endpoint={self.config.endpoint_url!r})"

    def put_if_absent(self, key, data, size=None):
        import obstore
        _check_key(key)
        n = size if size is not None else (len(data) if not hasattr(data, "read") else None)
        if n is None:
            raise ValueError("put_if_absent of a file needs its size")
        try:
            if n >= self.config.multipart_threshold:
                # no condition on a multipart complete through obstore: check, then rely on the
                # fresh id in the key (module docstring)
                try:
                    obstore.head(self._store, key)
                    raise PreconditionFailed(f"put {key!r}: precondition failed (the object exists)", key=key)
                except FileNotFoundError:
                    pass
                result = obstore.put(self._store, key, data, use_multipart=True,
                                     chunk_size=self.config.multipart_part_size, max_concurrency=4)
            else:
                body = data.read(n) if hasattr(data, "read") else data
                result = obstore.put(self._store, key, body, mode="create", use_multipart=False)
        except RemoteStorageError:
            raise
        except Exception as e:
            raise _s3_error(e, key, "put") from None
        return _etag(result.get("e_tag"))

    def put_if_match(self, key, data, etag):
        import obstore
        _check_key(key)
        try:
            result = obstore.put(self._store, key, data, mode={"e_tag": etag}, use_multipart=False)
        except Exception as e:
            err = _s3_error(e, key, "put")
            if isinstance(err, ObjectNotFound):      # If-Match on a missing key: the condition failed
                err = PreconditionFailed(f"put {key!r}: precondition failed (the object is gone)", key=key)
            raise err from None
        return _etag(result.get("e_tag"))

    def get(self, key):
        import obstore
        try:
            result = obstore.get(self._store, key)
            data = bytes(result.bytes())
            return StoredObject(data, _etag(result.meta.get("e_tag")))
        except Exception as e:
            raise _s3_error(e, key, "get") from None

    def get_range(self, key, start, end):
        import obstore
        if start < 0 or end < start:
            raise ValueError(f"invalid range [{start}, {end}) of {key!r}")
        if end == start:
            return b""
        try:
            return bytes(obstore.get_range(self._store, key, start=start, end=end))
        except Exception as e:
            raise _s3_error(e, key, "get range") from None

    def get_ranges(self, key, ranges):
        import obstore
        if not ranges:
            return []
        for s, e in ranges:
            if s < 0 or e <= s:
                raise ValueError(f"invalid range [{s}, {e}) of {key!r}")
        try:
            parts = obstore.get_ranges(self._store, key, starts=[s for s, _ in ranges], ends=[e for _, e in ranges])
        except Exception as e:
            raise _s3_error(e, key, "get ranges") from None
        return [bytes(p) for p in parts]

    def head(self, key):
        import obstore
        try:
            m = obstore.head(self._store, key)
        except Exception as e:
            raise _s3_error(e, key, "head") from None
        return _meta(m)

    def list(self, prefix):
        import obstore
        # obstore lists by path components: list the prefix's directory and keep the keys that
        # start with the whole prefix (a key prefix like "tiered" need not end with "/")
        directory = prefix if prefix.endswith("/") else prefix.rpartition("/")[0]
        out = []
        try:
            for batch in obstore.list(self._store, prefix=directory.rstrip("/") or None):
                out.extend(_meta(m) for m in batch if m["path"].startswith(prefix))
        except Exception as e:
            raise _s3_error(e, prefix, "list") from None
        out.sort(key=lambda m: m.key)
        return out

    def delete(self, key):
        import obstore
        try:
            obstore.delete(self._store, key)
        except FileNotFoundError:
            pass
        except Exception as e:
            raise _s3_error(e, key, "delete") from None

    def copy(self, src, dst):
        import obstore
        _check_key(dst)
        try:
            obstore.copy(self._store, src, dst, overwrite=True)    # CopyObject, server-side
        except Exception as e:
            raise _s3_error(e, src, "copy") from None

    def delete_many(self, keys):
        import obstore
        keys = list(keys)
        if not keys:
            return
        try:
            obstore.delete(self._store, keys)        # DeleteObjects, 1000 keys a request
        except FileNotFoundError:
            pass
        except Exception as e:
            raise _s3_error(e, keys[0], f"delete of {len(keys)} objects from") from None


def _meta(m) -> ObjectMeta:
    lm = m.get("last_modified")
    return ObjectMeta(m["path"], int(m["size"]), _etag(m.get("e_tag")),
                      int(lm.timestamp() * 1000) if lm is not None else None)


def _profile_credentials():
    """boto3's credential chain (profiles, SSO, ...) when no key is set here or in the
    environment and boto3 is installed; None leaves obstore's own chain (environment, web
    identity, container and instance metadata)."""
    if os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_WEB_IDENTITY_TOKEN_FILE"):
        return None
    profile_files = [os.environ.get("AWS_SHARED_CREDENTIALS_FILE") or os.path.expanduser("~/.aws/credentials"),
                     os.environ.get("AWS_CONFIG_FILE") or os.path.expanduser("~/.aws/config")]
    if not os.environ.get("AWS_PROFILE") and not any(os.path.exists(p) for p in profile_files):
        return None
    try:
        from obstore.auth.boto3 import Boto3CredentialProvider
        return Boto3CredentialProvider()
    except Exception:        # boto3 missing, or no credentials it can find: obstore's chain
        return None


# -- a local directory ------------------------------------------------------------------------------

_TMP = ".compactlog-tmp-"


class LocalDirectoryStore(ObjectStore):
    """The store as a directory tree (as Kafka's ``LocalTieredStorage``): key ``a/b/c`` is the file
    ``<root>/a/b/c``. Create-only by ``link(2)`` of a fsync'd temporary file (fails if the name
    exists, atomically, across processes); compare-and-swap under an ``flock`` of the key's
    directory, by ``rename(2)`` of a fsync'd temporary file; the directory fsync'd after each
    change, so a write that returned survives a crash. The ETag is the file's identity (inode,
    change time, size): every write makes a new file, so an ETag never comes back."""

    def __init__(self, root: str, config: StoreConfig | None = None):
        self.root = os.path.abspath(root)
        self.config = config or StoreConfig(backend="filesystem", root=self.root)
        try:
            os.makedirs(self.root, exist_ok=True)
        except OSError as e:
            raise _os_error(e, None, "open store at " + self.root) from None

    def __repr__(self) -> str:
        return f"LocalDirectoryStore({self.root!r})"

    def _path(self, key: str) -> str:
        return os.path.join(self.root, *_check_key(key).split("/"))

    def _makedirs(self, directory: str) -> None:
        """Create the key's directories, each new entry fsync'd into its parent, so an object
        whose write returned is still reachable after a crash."""
        missing = []
        d = directory
        while not os.path.isdir(d) and d != self.root:
            missing.append(d)
            d = os.path.dirname(d)
        for d in reversed(missing):
            try:
                os.mkdir(d)
            except FileExistsError:
                continue            # made meanwhile by another writer
            fsync_dir(os.path.dirname(d))

    def _write_tmp(self, directory: str, data, size: int | None) -> str:
        self._makedirs(directory)
        tmp = os.path.join(directory, f"{_TMP}{uuid.uuid4().hex}")
        try:
            with open(tmp, "xb") as f:
                if hasattr(data, "read"):
                    left = size
                    while left is None or left > 0:
                        chunk = data.read(min(8 * MiB, left) if left is not None else 8 * MiB)
                        if not chunk:
                            break
                        f.write(chunk)
                        if left is not None:
                            left -= len(chunk)
                else:
                    f.write(data)
                f.flush()
                os.fsync(f.fileno())
        except BaseException:
            _unlink_quietly(tmp)
            raise
        return tmp

    def put_if_absent(self, key, data, size=None):
        path = self._path(key)
        directory = os.path.dirname(path)
        try:
            tmp = self._write_tmp(directory, data, size)
            try:
                os.link(tmp, path)
            except FileExistsError:
                raise PreconditionFailed(f"put {key!r}: precondition failed (the object exists)", key=key) from None
            finally:
                _unlink_quietly(tmp)
            fsync_dir(directory)
            return _file_etag(os.stat(path))
        except RemoteStorageError:
            raise
        except OSError as e:
            raise _os_error(e, key, "put") from None

    def put_if_match(self, key, data, etag):
        path = self._path(key)
        directory = os.path.dirname(path)
        if not os.path.isdir(directory):
            raise PreconditionFailed(f"put {key!r}: precondition failed (the object is gone)", key=key)
        try:
            with self._dir_lock(directory):
                try:
                    current = _file_etag(os.stat(path))
                except FileNotFoundError:
                    raise PreconditionFailed(f"put {key!r}: precondition failed (the object is gone)", key=key) from None
                if current != etag:
                    raise PreconditionFailed(f"put {key!r}: precondition failed (the object changed)", key=key)
                tmp = self._write_tmp(directory, data, None)
                try:
                    os.rename(tmp, path)
                except BaseException:
                    _unlink_quietly(tmp)
                    raise
                fsync_dir(directory)
                return _file_etag(os.stat(path))
        except RemoteStorageError:
            raise
        except OSError as e:
            raise _os_error(e, key, "put") from None

    def _dir_lock(self, directory: str):
        return _DirLock(directory)

    def copy(self, src, dst):
        # the bytes copied, not a second link: a ``file://`` data dir may be a broker's own, whose
        # active segment grows in place
        path, target = self._path(src), self._path(dst)
        try:
            directory = os.path.dirname(target)
            self._makedirs(directory)
            with open(path, "rb") as f:
                tmp = self._write_tmp(directory, f, os.fstat(f.fileno()).st_size)
            os.replace(tmp, target)
            fsync_dir(directory)
        except RemoteStorageError:
            raise
        except OSError as e:
            raise _os_error(e, src, "copy") from None

    def get(self, key):
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                st = os.fstat(f.fileno())
                return StoredObject(f.read(), _file_etag(st))
        except OSError as e:
            raise _os_error(e, key, "get") from None

    def get_range(self, key, start, end):
        if start < 0 or end < start:
            raise ValueError(f"invalid range [{start}, {end}) of {key!r}")
        path = self._path(key)
        try:
            with open(path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if end == start:
                    return b""
                if start >= size and size > 0:
                    raise RangeNotSatisfiable(f"get range {key!r}: range not satisfiable "
                                              f"(starts at {start}, the object has {size} bytes)", key=key)
                return os.pread(f.fileno(), min(end, size) - start, start) if start < size else b""
        except RemoteStorageError:
            raise
        except OSError as e:
            raise _os_error(e, key, "get range") from None

    def head(self, key):
        try:
            st = os.stat(self._path(key))
        except OSError as e:
            raise _os_error(e, key, "head") from None
        return ObjectMeta(key, st.st_size, _file_etag(st), st.st_mtime_ns // 1_000_000)

    def list(self, prefix):
        directory = prefix.rpartition("/")[0]
        top = os.path.join(self.root, *directory.split("/")) if directory else self.root
        out = []
        try:
            for dirpath, dirnames, filenames in os.walk(top):
                rel = os.path.relpath(dirpath, self.root)
                base = "" if rel == "." else rel.replace(os.sep, "/") + "/"
                for name in filenames:
                    if name.startswith(_TMP):
                        continue
                    key = base + name
                    if key.startswith(prefix):
                        try:
                            st = os.stat(os.path.join(dirpath, name))
                        except FileNotFoundError:
                            continue        # deleted while listing
                        out.append(ObjectMeta(key, st.st_size, _file_etag(st), st.st_mtime_ns // 1_000_000))
        except OSError as e:
            raise _os_error(e, prefix, "list") from None
        out.sort(key=lambda m: m.key)
        return out

    def delete(self, key):
        path = self._path(key)
        directory = os.path.dirname(path)
        try:
            with self._dir_lock(directory):
                os.unlink(path)
                fsync_dir(directory)
        except FileNotFoundError:
            pass
        except OSError as e:
            raise _os_error(e, key, "delete") from None


class _DirLock:
    """An exclusive ``flock`` on a directory: it excludes other processes and, flock locks
    belonging to an open file description, other threads of this one too."""

    def __init__(self, directory: str):
        self.directory = directory
        self.fd = -1

    def __enter__(self):
        self.fd = os.open(self.directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        except BaseException:
            os.close(self.fd)
            raise
        return self

    def __exit__(self, *exc):
        os.close(self.fd)       # closing the last descriptor releases the lock


def _file_etag(st: os.stat_result) -> str:
    return f'"{st.st_ino:x}-{st.st_ctime_ns:x}-{st.st_size:x}"'


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _os_error(e: OSError, key: str | None, op: str) -> RemoteStorageError:
    what = f"{op} {key!r}" if key else op
    if isinstance(e, NotADirectoryError) and op == "put":
        return RemoteStorageError(f"{what}: a part of the key is an object, not a prefix (a directory "
                                  f"store cannot hold both 'a' and 'a/b')", key=key)
    if isinstance(e, (FileNotFoundError, NotADirectoryError)):
        return ObjectNotFound(f"{what}: no such object", key=key)
    if isinstance(e, PermissionError):
        return AccessDenied(f"{what}: access denied: {e.strerror}", key=key)
    if isinstance(e, IsADirectoryError):
        return RemoteStorageError(f"{what}: the key names a directory", key=key)
    if e.errno in (errno.ENOSPC, errno.EIO, errno.EROFS, errno.EDQUOT, errno.ENODEV, errno.ESTALE):
        return StoreUnavailable(f"{what}: {e.strerror}", key=key)
    return RemoteStorageError(f"{what}: {e.strerror or e}", key=key)
