"""SCRAM credentials kept in the data dir: Kafka's ``ScramControlManager`` (validating and applying
AlterUserScramCredentials), ``ScramImage.describe`` (DescribeUserScramCredentials) and the
credential cache the authenticator reads (``CredentialCache``), security.md §5.3-5.4.

Kafka keeps ``UserScramCredentialRecord``s in its metadata log; a single node keeps the same fields
in one file at the data dir's root, ``compactlog.scram-credentials.json`` (a file, so Kafka's log
loader, which only looks at directories, ignores it): per user and mechanism the salt, StoredKey,
ServerKey (base64) and the iterations, never a password. It is replaced atomically (a temporary
file of mode 0600, fsync, rename, fsync of the directory), so a kill -9 during an alteration
leaves the old or the new file, never a torn one; the in-memory map changes only after the file
is durable. Readers (the SASL exchanges, in worker threads) see one whole map at a time.

Who writes: the broker (AlterUserScramCredentials) while it runs and holds the data-dir lock;
``compactlog users`` on a stopped broker's data dir (it takes the lock), as
``kafka-storage format --add-scram`` bootstraps credentials before the first start.
"""

from __future__ import annotations

import base64
import json
import os
import threading
from dataclasses import dataclass

from ...errors import StorageError
from ...storage.fsutil import fsync_dir
from .scram import BY_TYPE, MECHANISMS, ScramCredential, ScramMechanism, credential_from_salted

CREDENTIALS_FILE = "compactlog.scram-credentials.json"
FILE_MODE = 0o600


@dataclass(frozen=True)
class Upsertion:
    """One ``ScramCredentialUpsertion``: the client salted the password (the password never
    reaches the broker)."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return f"Upsertion(name={self.name!r}, mechanism={self.mechanism}, iterations={self.iterations}, [hidden])"


@dataclass(frozen=True)
class Deletion:
    name: str
    mechanism: int


@dataclass(frozen=True)
class UserResult:
    """One user's answer: an ErrorCode member name ("none" for success) and Kafka's message."""

    user: str
    error: str = "none"
    message: str | None = None
    credentials: tuple[tuple[int, int], ...] = ()      # (mechanism type, iterations): Describe only


class CredentialCache:
    """The SCRAM credentials of one data dir, loaded once, changed only through ``alter``."""

    def __init__(self, data_dir: str):
        self.path = os.path.join(data_dir, CREDENTIALS_FILE)
        self._write_lock = threading.Lock()
        self._map: dict[tuple[str, int], ScramCredential] = self._load()

    # -- reading (any thread) -------------------------------------------------------------------
    def lookup(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        return self._map.get((user, mechanism.type_code))

    def lookup_any(self, user: str) -> tuple[ScramMechanism, ScramCredential] | None:
        """The user's credential of either mechanism (SHA-256 first): PLAIN checks a password
        against it."""
        for code in sorted(BY_TYPE):
            found = self._map.get((user, code))
            if found is not None:
                return BY_TYPE[code], found
        return None

    def users(self) -> dict[str, list[tuple[int, int]]]:
        """user -> [(mechanism type, iterations)], users sorted."""
        out: dict[str, list[tuple[int, int]]] = {}
        for (user, code), cred in sorted(self._map.items()):
            out.setdefault(user, []).append((code, cred.iterations))
        return out

    def __len__(self) -> int:
        return len(self._map)

    def describe(self, names: list[str] | None) -> list[UserResult]:
        """``ScramImage.describe``: every user when ``names`` is None or empty; else each name once
        (a name listed twice: DUPLICATE_RESOURCE; unknown: RESOURCE_NOT_FOUND)."""
        users = self.users()
        if not names:
            return [UserResult(u, credentials=tuple(c)) for u, c in users.items()]
        counts: dict[str, int] = {}
        for n in names:
            counts[n] = counts.get(n, 0) + 1
        out = []
        for n in counts:
            if counts[n] > 1:
                out.append(UserResult(n, "duplicate_resource", "Cannot describe SCRAM credentials for "
                                      f"the same user twice in a single request: {n}"))
            elif n not in users:
                out.append(UserResult(n, "resource_not_found",
                                      f"Attempt to describe a user credential that does not exist: {n}"))
            else:
                out.append(UserResult(n, credentials=tuple(users[n])))
        return out

    # -- writing (one writer at a time) ---------------------------------------------------------
    def alter(self, deletions: list[Deletion], upsertions: list[Upsertion]) -> list[UserResult]:
        """``ScramControlManager.alterCredentials``: one alteration per user and request (a second
        one drops the user's first with DUPLICATE_RESOURCE), every valid change applied together
        and made durable before it is answered."""
        with self._write_lock:
            errors: dict[str, UserResult] = {}
            to_delete: dict[str, Deletion] = {}
            to_upsert: dict[str, Upsertion] = {}
            duplicate = "A user credential cannot be altered twice in the same request"
            for d in deletions:
                if d.name in errors:
                    continue
                if to_delete.pop(d.name, None) is not None:
                    errors[d.name] = UserResult(d.name, "duplicate_resource", duplicate)
                    continue
                failure = _check_name_and_mechanism(d.name, d.mechanism)
                if failure is None and (d.name, d.mechanism) not in self._map:
                    failure = UserResult(d.name, "resource_not_found",
                                         "Attempt to delete a user credential that does not exist")
                if failure is not None:
                    errors[d.name] = failure
                else:
                    to_delete[d.name] = d
            for u in upsertions:
                if u.name in errors:
                    continue
                if to_delete.pop(u.name, None) is not None or to_upsert.pop(u.name, None) is not None:
                    errors[u.name] = UserResult(u.name, "duplicate_resource", duplicate)
                    continue
                failure = _check_name_and_mechanism(u.name, u.mechanism)
                if failure is None:
                    mech = BY_TYPE[u.mechanism]
                    if u.iterations < mech.min_iterations:
                        failure = UserResult(u.name, "unacceptable_credential", "Too few iterations")
                    elif u.iterations > mech.max_iterations:
                        failure = UserResult(u.name, "unacceptable_credential", "Too many iterations")
                if failure is not None:
                    errors[u.name] = failure
                else:
                    to_upsert[u.name] = u
            changed = dict(self._map)
            for d in to_delete.values():
                del changed[(d.name, d.mechanism)]
            for u in to_upsert.values():
                changed[(u.name, u.mechanism)] = credential_from_salted(
                    BY_TYPE[u.mechanism], u.salted_password, u.salt, u.iterations)
            if to_delete or to_upsert:
                self._store(changed)
                self._map = changed
            return ([UserResult(d.name) for d in to_delete.values()]
                    + [UserResult(u.name) for u in to_upsert.values()] + list(errors.values()))

    # -- the file -------------------------------------------------------------------------------
    def _load(self) -> dict[tuple[str, int], ScramCredential]:
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise StorageError(f"{self.path}: cannot be read: {e.strerror or e}") from None
        try:
            doc = json.loads(raw)
            out = {}
            for entry in doc["credentials"]:
                code = int(entry["mechanism"])
                if code not in BY_TYPE:
                    raise ValueError(f"unknown mechanism type {code}")
                out[(str(entry["name"]), code)] = ScramCredential(
                    base64.b64decode(entry["salt"]), base64.b64decode(entry["stored_key"]),
                    base64.b64decode(entry["server_key"]), int(entry["iterations"]))
            return out
        except (ValueError, KeyError, TypeError) as e:
            raise StorageError(f"{self.path}: not a SCRAM credentials file ({type(e).__name__}: {e})") from None

    def _store(self, credentials: dict[tuple[str, int], ScramCredential]) -> None:
        doc = {"version": 1, "credentials": [
            {"name": user, "mechanism": code, "mechanism_name": BY_TYPE[code].name,
             "iterations": c.iterations, "salt": base64.b64encode(c.salt).decode(),
             "stored_key": base64.b64encode(c.stored_key).decode(),
             "server_key": base64.b64encode(c.server_key).decode()}
            for (user, code), c in sorted(credentials.items())]}
        write_private(self.path, (json.dumps(doc, indent=1) + "\n").encode("utf-8"))


def _check_name_and_mechanism(name: str, mechanism: int) -> UserResult | None:
    if not name:
        return UserResult(name, "unacceptable_credential", "Username must not be empty")
    if mechanism not in BY_TYPE:
        return UserResult(name, "unsupported_sasl_mechanism", "Unknown SCRAM mechanism")
    return None


def write_private(path: str, data: bytes) -> None:
    """Replace ``path`` atomically with a file only its owner can read (0600, whatever the umask)."""
    tmp = path + ".tmp"
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            os.fchmod(fd, FILE_MODE)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
    fsync_dir(os.path.dirname(os.path.abspath(path)))


def mechanism_named(name: str) -> ScramMechanism:
    """``SCRAM-SHA-256`` / ``SCRAM-SHA-512`` (case as Kafka writes them)."""
    try:
        return MECHANISMS[name.upper()]
    except KeyError:
        raise ValueError(f"unknown SCRAM mechanism {name!r}: use SCRAM-SHA-256 or SCRAM-SHA-512") from None
