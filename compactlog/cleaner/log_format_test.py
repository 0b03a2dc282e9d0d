"""Where the cleaner's run log goes: never inside the data dir Kafka would load."""

from __future__ import annotations

import os

import pytest

from compactlog.cleaner.log_format import CleanerLog, cleaner_log_dir
from compactlog.errors import ConfigError
from compactlog.storage.config import BrokerConfig


def test_next_to_the_data_dir_by_default_else_where_the_user_says(tmp_path):
    data = tmp_path / "kafka-logs"
    data.mkdir()
    assert cleaner_log_dir(str(data)) == f"{os.path.realpath(data)}.logs"
    assert cleaner_log_dir(str(data) + "/") == f"{os.path.realpath(data)}.logs"
    setting = BrokerConfig({"compactlog.cleaner.log.dir": str(tmp_path / "by-setting")})
    assert cleaner_log_dir(str(data), setting) == str(tmp_path / "by-setting")
    assert cleaner_log_dir(str(data), setting, str(tmp_path / "flag")) == str(tmp_path / "flag")
    assert cleaner_log_dir(str(data), None, str(data)) == os.path.realpath(data)   # a file at the root: ignored by Kafka


def test_inside_the_data_dir_is_refused(tmp_path):
    data = tmp_path / "d"
    data.mkdir()
    with pytest.raises(ConfigError, match=r"^--log-dir .*/d/logs is inside the data dir .*: Kafka's loader refuses"):
        cleaner_log_dir(str(data), None, str(data / "logs"))
    inside = BrokerConfig({"compactlog.cleaner.log.dir": str(data / "t-0")})
    with pytest.raises(ConfigError, match="^compactlog.cleaner.log.dir "):
        cleaner_log_dir(str(data), inside)


def test_an_unwritable_run_log_is_one_warning(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("")
    log = CleanerLog(str(tmp_path / "d"), None, str(blocker / "sub"))
    log.info("one")
    log.info("two")
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("warning: the cleaner's run log cannot be written: ")
    assert "--log-dir" in err
