"""Every kind of work's tools and tasks, gathered (the original tasks first)."""

from __future__ import annotations

from functools import cache

from stead.tools.base import Tool

from . import (
    suite,
    tasks_chat,
    tasks_code,
    tasks_files,
    tasks_mail,
    tasks_original,
    tasks_pay,
    tasks_travel,
)

KINDS = (tasks_mail, tasks_files, tasks_pay, tasks_chat, tasks_travel, tasks_code)


@cache
def tools() -> dict[str, Tool]:
    every = dict(suite.TOOLS)
    for kind in KINDS:
        every.update(kind.TOOLS)
    return every


def tasks() -> list[suite.Task]:
    return [*tasks_original.TASKS, *(t for kind in KINDS for t in kind.TASKS)]
