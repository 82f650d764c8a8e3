"""Schedules: agents woken, or made afresh, at the times people chose.

:mod:`.definition` (when, what, and what to do when late or overlapping),
:mod:`.cron` (cron lines in a time zone), :mod:`.book` (the Python API:
:class:`Schedules`), :mod:`.firing` (what each worker pass fires) and
:mod:`.delivery` (a firing into the agent's journal, exactly once). The rows
live in :mod:`stead.store.schedule_rows`. This package builds on the runtime;
the runtime never imports it.
"""

from .book import Schedules, ScheduleView
from .definition import Definition
from .firing import FireReport, fire_due

__all__ = ["Definition", "FireReport", "ScheduleView", "Schedules", "fire_due"]
