"""atomic_write leaves no half-written file; read_text names the line of a byte that is not UTF-8."""

from __future__ import annotations

import errno
import os

import pytest

from compactlog.errors import StorageError
from compactlog.storage import fsutil


@pytest.mark.parametrize("failing", ["write", "fsync", "replace"])
def test_a_failed_write_removes_its_tmp_and_keeps_the_old_file(tmp_path, monkeypatch, failing):
    path = str(tmp_path / "cleaner-offset-checkpoint")
    fsutil.atomic_write(path, b"old\n")

    def disk_full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    if failing == "write":
        real_open = open

        class Full:
            def __init__(self, f):
                self.f = f

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self.f.close()

            def write(self, data):
                self.f.write(data[:1])
                self.f.flush()
                disk_full()

        monkeypatch.setattr("builtins.open", lambda p, mode="r", *a, **k: Full(real_open(p, mode, *a, **k))
                            if p.endswith(".tmp") else real_open(p, mode, *a, **k))
    else:
        monkeypatch.setattr(os, failing, disk_full)
    with pytest.raises(OSError) as err:
        fsutil.atomic_write(path, b"new content\n")
    monkeypatch.undo()
    assert err.value.errno == errno.ENOSPC
    assert err.value.filename == path + ".tmp"          # the error names the file it concerns
    assert sorted(os.listdir(tmp_path)) == ["cleaner-offset-checkpoint"]
    with open(path, "rb") as f:
        assert f.read() == b"old\n"


def test_read_text_names_line_and_column(tmp_path):
    p = tmp_path / "f"
    p.write_bytes("line one\nsecond é\nthird \xc3".encode("latin-1"))
    with pytest.raises(StorageError) as err:
        fsutil.read_text(str(p))
    assert str(err.value) == f"{p}: line 2: byte 0xe9 at column 8 is not UTF-8 text"
    p.write_bytes("é\n".encode())
    assert fsutil.read_text(str(p)) == "é\n"
    with pytest.raises(FileNotFoundError):
        fsutil.read_text(str(tmp_path / "missing"))
