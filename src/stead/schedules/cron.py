"""Cron expressions: five fields read once, and the next time they name after an instant.

The fields are the classic ones, minute, hour, day of the month, month and day
of the week, each ``*``, a number, a range ``a-b``, a step ``*/n`` or
``a-b/n``, or a list of those joined by commas; months and days may be named
(``jan``, ``mon``); a day of the week is 0-7 with both 0 and 7 Sunday. When
both day fields are restricted, a day matching either one matches, as in every
cron since Vixie's. ``@hourly``, ``@daily`` (``@midnight``), ``@weekly``,
``@monthly`` and ``@yearly`` (``@annually``) stand for their usual lines.

Times are wall-clock times in the schedule's time zone, and a zone's changes of
offset are where schedules go wrong, so they are decided here once:

* a time that does not exist (the hour skipped when clocks go forward) fires
  when the gap ends, once;
* a time that happens twice (the hour repeated when clocks go back) fires at
  its first occurrence only, unless the hour field is ``*``: a job of every
  hour then runs in both, as hours keep passing.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from ..errors import UsageError

_UTC = dt.UTC
_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")
_MACROS = {
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
    "@monthly": "0 0 1 * *",
    "@weekly": "0 0 * * 0",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@hourly": "0 * * * *",
}
_FIELDS = (  # name, lowest, highest, names for the numbers from lowest on
    ("minute", 0, 59, ()),
    ("hour", 0, 23, ()),
    ("day of the month", 1, 31, ()),
    ("month", 1, 12, _MONTHS),
    ("day of the week", 0, 7, _DAYS),
)
HORIZON_DAYS = 366 * 5
"""How far ahead a match is looked for: beyond it an expression never matches (30 February)."""
_HELP = (
    "a cron line has five fields: minute hour day-of-month month day-of-week "
    "(e.g. '0 9 * * mon-fri')"
)


@dataclass(frozen=True, slots=True)
class Cron:
    """A parsed cron expression: the values each field allows."""

    text: str
    minutes: tuple[int, ...]
    hours: tuple[int, ...]
    days: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    any_day: bool
    any_weekday: bool

    @property
    def every_hour(self) -> bool:
        return len(self.hours) == 24

    def day_matches(self, day: dt.date) -> bool:
        if day.month not in self.months:
            return False
        weekday = (day.weekday() + 1) % 7  # Monday is 0 to Python, 1 to cron
        in_month, in_week = day.day in self.days, weekday in self.weekdays
        if self.any_day or self.any_weekday:
            return in_month and in_week
        return in_month or in_week

    def after(self, instant: float, zone: ZoneInfo) -> float:
        """The first time this expression names strictly after ``instant`` (seconds
        since the epoch) in ``zone``; :class:`UsageError` if none within five years."""
        local = dt.datetime.fromtimestamp(instant, _UTC).astimezone(zone).replace(tzinfo=None)
        start = local.replace(second=0, microsecond=0)
        day = start.date()
        for _ in range(HORIZON_DAYS):
            if self.day_matches(day):
                found = self._in_day(day, start, instant, zone)
                if found is not None:
                    return found
            day += dt.timedelta(days=1)
        raise UsageError(f"the cron expression {self.text!r} names no time in the next five years")

    def _in_day(
        self, day: dt.date, start: dt.datetime, instant: float, zone: ZoneInfo
    ) -> float | None:
        for hour in self.hours:
            for minute in self.minutes:
                wall = dt.datetime(day.year, day.month, day.day, hour, minute)
                if wall < start:
                    continue
                for when in _instants(wall, zone, both=self.every_hour):
                    if when > instant:
                        return when
        return None


def _instants(wall: dt.datetime, zone: ZoneInfo, *, both: bool) -> list[float]:
    """The instants a wall-clock time stands for in ``zone``: none skipped, one, or
    (clocks going back, with ``both``) two; a skipped one is moved to the gap's end."""
    first = wall.replace(tzinfo=zone, fold=0)
    if _wall_of(first.timestamp(), zone) != wall:  # in a gap: the first minute after it
        probe = wall
        for _ in range(24 * 60):
            probe += dt.timedelta(minutes=1)
            aware = probe.replace(tzinfo=zone, fold=0)
            if _wall_of(aware.timestamp(), zone) == probe:
                return [aware.timestamp()]
        return []
    second = wall.replace(tzinfo=zone, fold=1)
    if both and second.utcoffset() != first.utcoffset():
        return [first.timestamp(), second.timestamp()]
    return [first.timestamp()]


def _wall_of(instant: float, zone: ZoneInfo) -> dt.datetime:
    return dt.datetime.fromtimestamp(instant, _UTC).astimezone(zone).replace(tzinfo=None)


def parse_cron(text: str) -> Cron:
    """Read a cron expression, or say which field is wrong and what it may hold."""
    if not isinstance(text, str) or len(text) > 200:
        raise UsageError(f"a cron expression is a short text; {_HELP}")
    line = _MACROS.get(text.strip().lower(), text.strip())
    parts = line.split()
    if len(parts) != 5:
        raise UsageError(f"{text!r} has {len(parts)} fields; {_HELP}, or @hourly, @daily, ...")
    sets = [_field(part, *spec) for part, spec in zip(parts, _FIELDS, strict=True)]
    weekdays = frozenset(0 if d == 7 else d for d in sets[4])
    return Cron(
        text=text.strip(),
        minutes=tuple(sorted(sets[0])),
        hours=tuple(sorted(sets[1])),
        days=frozenset(sets[2]),
        months=frozenset(sets[3]),
        weekdays=weekdays,
        any_day=parts[2] == "*",
        any_weekday=parts[4] == "*",
    )


def _field(part: str, name: str, low: int, high: int, names: tuple[str, ...]) -> set[int]:
    values: set[int] = set()
    for item in part.lower().split(","):
        span, _, step_text = item.partition("/")
        step = _number(step_text, name, 1, high - low + 1) if step_text else 1
        if span == "*":
            first, last = low, high
        elif "-" in span:
            a, _, b = span.partition("-")
            first, last = _value(a, name, low, high, names), _value(b, name, low, high, names)
            if first > last:
                raise UsageError(f"the {name} range {span!r} runs backwards; write it low-high")
        else:
            first = _value(span, name, low, high, names)
            last = high if step_text else first
        values.update(range(first, last + 1, step))
    return values


def _value(text: str, name: str, low: int, high: int, names: tuple[str, ...]) -> int:
    if text in names:
        return names.index(text) + (1 if name == "month" else 0)
    return _number(text, name, low, high)


def _number(text: str, name: str, low: int, high: int) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 2:
        raise UsageError(f"{text!r} is not a {name}: use a number from {low} to {high}")
    value = int(text)
    if not low <= value <= high:
        raise UsageError(f"{value} is not a {name}: use a number from {low} to {high}")
    return value
