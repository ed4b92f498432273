"""One command per run folder (the lock file naming its holder) and the output root's write test. The kernel's
lock is per open file, so two holds in this one process stand for two commands."""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

from runner.sinks.run_folder import LOCK_NAME, LockHolder, RunFolderBusy, hold_run_folder, unwritable_reason

# Above Linux's largest pid (pid_max ≤ 2**22): no process has it.
NO_SUCH_PID = 2**22 + 1


def test_a_second_hold_is_refused_naming_the_holder(tmp_path):
    with hold_run_folder(tmp_path, say=pytest.fail) as me:
        assert me.pid == os.getpid() and me.host == socket.gethostname()
        with pytest.raises(RunFolderBusy) as refused:
            with hold_run_folder(tmp_path, say=pytest.fail):
                pass
    text = str(refused.value)
    assert f"run folder {tmp_path} is in use by another command: pid {os.getpid()} on {me.host}, started " \
           f"{me.started}" in text
    assert "fix: wait for it to end, or run=<another name>" in text


def test_a_released_folder_is_free_and_its_lock_file_empty(tmp_path):
    with hold_run_folder(tmp_path, say=pytest.fail):
        assert LockHolder.parse((tmp_path / LOCK_NAME).read_text()).pid == os.getpid()
    assert (tmp_path / LOCK_NAME).read_text() == ""
    with hold_run_folder(tmp_path, say=pytest.fail):  # no takeover line: the last holder released it
        pass


def test_a_lock_left_by_a_dead_command_is_taken_over_with_a_line(tmp_path):
    left = LockHolder(host=socket.gethostname(), pid=NO_SUCH_PID, started="2026-01-01T00:00:00+0000")
    (tmp_path / LOCK_NAME).write_text(json.dumps(vars(left)))
    lines = []
    with hold_run_folder(tmp_path, say=lines.append):
        assert LockHolder.parse((tmp_path / LOCK_NAME).read_text()).pid == os.getpid()
    assert lines == [f"note: taking over the lock of {tmp_path} left by pid {NO_SUCH_PID} on {left.host}, started "
                     f"2026-01-01T00:00:00+0000, which ended without releasing it"]
    assert left.gone()


def test_output_root_write_test(tmp_path):
    assert unwritable_reason(tmp_path / "new" / "deeper") is None and (tmp_path / "new" / "deeper").is_dir()
    assert not list((tmp_path / "new" / "deeper").iterdir())  # the test file is gone
    assert unwritable_reason(Path("/proc/nope")) == "No such file or directory"
    (tmp_path / "file").write_text("")
    assert unwritable_reason(tmp_path / "file") == "it is a file, not a folder"
