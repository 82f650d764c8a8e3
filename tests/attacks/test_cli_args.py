"""Boundary: the command line's arguments (docs/security.md, "CLI and local specs").

Numbers past what they can mean (a port over 65535, a step count no run
reaches, a negative event, a worker of a hundred million threads), store URLs
that do not parse, PostgreSQL schema names whose derived names pass the
server's 63-character limit, and data folders that are the root of the file
system or a kernel's pseudo file system. What must never happen: a traceback,
a value taken as given, or anything created. Every refusal is exit 2 and one
line saying what to fix (issue 26, item 13).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ..cli.test_bad_input import refused
from ..cli.test_cli import write_agent


def _files(folder: Path) -> set[Path]:
    return set(folder.rglob("*"))


def test_numbers_past_what_they_can_mean_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_agent(tmp_path, [{"finish": "done"}])
    store = f"sqlite:///{tmp_path / 'db' / 'stead.db'}"
    before = _files(tmp_path)
    cases = [
        (("serve", "--port", "70000"), "65535"),
        (("serve", "--port", "0"), "65535"),
        (("run", str(spec), "--max-steps", str(10**23)), "--max-steps"),
        (("trace", "ag_x", "--from", "-5"), "--from"),
        (("trace", "ag_x", "--to", "-1"), "--to"),
        (("trace", "ag_x", "--from", str(2**64)), "--from"),
        (("show", "ag_x", "--at", "-1"), "--at"),
        (("work", "--concurrency", "100000000"), "--concurrency"),
        (("work", "--in-flight", "100000000"), "--in-flight"),
    ]
    for argv, needle in cases:
        refused(capsys, *argv, "--store", store, needle=needle)
    assert _files(tmp_path) == before


def test_store_urls_that_do_not_parse_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for url in ("postgresql://[::1", "postgresql://[::1]:99999/db", "postgres://h:port/db"):
        refused(capsys, "ls", "--store", url, needle="store URL")
    # the notify channel is stead_work_SCHEMA: at most 63 characters in all
    refused(capsys, "ls", "--store", f"postgresql://127.0.0.1/test?schema={'s' * 53}",
            needle="at most 52")  # fmt: skip


def test_a_data_folder_that_is_the_root_or_a_kernel_file_system_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = write_agent(tmp_path, [{"finish": "done"}])
    store = f"sqlite:///{tmp_path / 'db' / 'stead.db'}"
    root_before = set(os.listdir("/"))
    before = _files(tmp_path)
    for folder in ("/", "/proc", "/proc/self", "/sys/kernel", "/dev", "/tmp/../proc"):
        refused(capsys, "run", str(spec), "--store", store, "--data-dir", folder,
                needle="--data-dir")  # fmt: skip
    for blobs in ("/", "/proc/x", "file:///sys/kernel"):
        refused(capsys, "run", str(spec), "--store", store, "--data-dir", str(tmp_path / "d"),
                "--blobs", blobs, needle="--blobs")  # fmt: skip
    a_file = tmp_path / "a-file"
    a_file.write_text("x", encoding="utf-8")
    refused(capsys, "run", str(spec), "--store", store, "--data-dir", str(a_file),
            needle="not a folder")  # fmt: skip
    assert set(os.listdir("/")) == root_before
    assert _files(tmp_path) == {*before, a_file}


def test_a_data_folder_from_the_environment_is_held_to_the_same_rules(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = write_agent(tmp_path, [{"finish": "done"}])
    before = _files(tmp_path)
    monkeypatch.setenv("STEAD_DATA_DIR", "/")
    refused(capsys, "run", str(spec), "--store", f"sqlite:///{tmp_path / 'db' / 'stead.db'}",
            needle="$STEAD_DATA_DIR / is the root")  # fmt: skip
    monkeypatch.delenv("STEAD_DATA_DIR")
    monkeypatch.setenv("STEAD_BLOBS", "/proc/blobs")
    refused(capsys, "run", str(spec), "--store", f"sqlite:///{tmp_path / 'db' / 'stead.db'}",
            needle="$STEAD_BLOBS /proc/blobs")  # fmt: skip
    # a store at the root of the file system puts its data folder there: refused too
    refused(capsys, "run", str(spec), "--store", "sqlite:////stead.db", needle="the data folder /")
    assert _files(tmp_path) == before and not os.path.exists("/stead.db")
