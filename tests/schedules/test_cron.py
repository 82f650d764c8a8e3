"""Cron lines: the next time they name, checked against a minute-by-minute walk, and
the two moments a zone's offset changes (a skipped hour, a repeated hour)."""

from __future__ import annotations

import datetime as dt
import itertools
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stead.errors import UsageError
from stead.schedules.cron import parse_cron
from stead.schedules.definition import parse_definition

UTC = ZoneInfo("UTC")
NEW_YORK = ZoneInfo("America/New_York")


def matches(line: str, when: dt.datetime) -> bool:
    """The plain reading of a cron line for one minute (no zone changes): each field."""
    c = parse_cron(line)
    return when.minute in c.minutes and when.hour in c.hours and c.day_matches(when.date())


field = st.one_of(
    st.just("*"),
    st.integers(0, 59).map(str),
    st.tuples(st.integers(0, 30), st.integers(30, 59)).map(lambda t: f"{t[0]}-{t[1]}"),
    st.integers(2, 20).map(lambda n: f"*/{n}"),
)
hours = st.one_of(st.just("*"), st.integers(0, 23).map(str), st.just("9-17"), st.just("*/6"))
days = st.one_of(st.just("*"), st.integers(1, 28).map(str), st.just("1,15"))
weekdays = st.one_of(st.just("*"), st.just("mon-fri"), st.just("0"), st.just("sat,sun"))


@settings(max_examples=60, deadline=None)
@given(minute=field, hour=hours, day=days, weekday=weekdays,
       start=st.integers(1_700_000_000, 1_900_000_000))  # fmt: skip
def test_the_next_time_is_the_first_matching_minute_after(
    minute: str, hour: str, day: str, weekday: str, start: int
) -> None:
    line = f"{minute} {hour} {day} * {weekday}"
    nxt = parse_cron(line).after(start, UTC)
    assert nxt > start and nxt % 60 == 0
    found = dt.datetime.fromtimestamp(nxt, dt.UTC)
    assert matches(line, found)
    # no minute in between matches (walked at most two months)
    probe = dt.datetime.fromtimestamp(start - start % 60, dt.UTC) + dt.timedelta(minutes=1)
    steps = 0
    while probe < found and steps < 90_000:
        assert not matches(line, probe), (line, probe)
        probe += dt.timedelta(minutes=1)
        steps += 1


def test_both_day_fields_restricted_match_either() -> None:
    c = parse_cron("0 12 13 * fri")  # the 13th, and every Friday
    monday_13 = dt.datetime(2026, 7, 13, tzinfo=dt.UTC)  # a Monday
    assert dt.datetime.fromtimestamp(c.after(monday_13.timestamp() - 1, UTC), dt.UTC).day == 13
    after = c.after(dt.datetime(2026, 7, 13, 13, tzinfo=dt.UTC).timestamp(), UTC)
    assert dt.datetime.fromtimestamp(after, dt.UTC).date() == dt.date(2026, 7, 17)  # Friday


def test_a_time_the_clocks_skip_fires_once_when_the_gap_ends() -> None:
    # 2026-03-08: New York goes from 02:00 EST straight to 03:00 EDT
    c = parse_cron("30 2 * * *")
    before = dt.datetime(2026, 3, 7, 12, tzinfo=NEW_YORK).timestamp()
    times = [c.after(before, NEW_YORK)]
    times.append(c.after(times[0], NEW_YORK))
    local = [dt.datetime.fromtimestamp(t, NEW_YORK) for t in times]
    assert local[0].replace(tzinfo=None) == dt.datetime(2026, 3, 8, 3, 0)
    assert local[1].replace(tzinfo=None) == dt.datetime(2026, 3, 9, 2, 30)


def test_a_repeated_hour_fires_a_daily_job_once_and_an_hourly_job_in_both() -> None:
    # 2026-11-01: New York's 01:00-02:00 happens twice
    night = dt.datetime(2026, 11, 1, 0, 30, tzinfo=NEW_YORK).timestamp()
    daily = parse_cron("30 1 * * *")
    first = daily.after(night, NEW_YORK)
    assert daily.after(first, NEW_YORK) - first == pytest.approx(
        25 * 3600
    )  # next day's, not an hour on
    hourly = parse_cron("0 * * * *")
    t, seen = night, []
    for _ in range(4):
        t = hourly.after(t, NEW_YORK)
        seen.append(t)
    assert [b - a for a, b in itertools.pairwise(seen)] == [3600.0, 3600.0, 3600.0]


@pytest.mark.parametrize(
    ("line", "words"),
    [
        ("* * * *", "has 4 fields"),
        ("60 * * * *", "0 to 59"),
        ("* 24 * * *", "0 to 23"),
        ("* * 0 * *", "1 to 31"),
        ("* * * 13 *", "1 to 12"),
        ("* * * * 8", "0 to 7"),
        ("5-1 * * * *", "runs backwards"),
        ("*/0 * * * *", "1 to 60"),
        ("x * * * *", "is not a minute"),
        ("\u0661 * * * *", "is not a minute"),  # a digit of another script
        ("0 0 31 2 *", "no time in the next five years"),
        ("* " * 200, "at most 200"),
    ],
)
def test_bad_cron_lines_say_which_field_and_what_it_takes(line: str, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        parse_definition({"cron": line, "message": "x"}, now=1_767_225_600.0, for_spec=False)


def test_macros_and_names_read_as_their_lines() -> None:
    assert parse_cron("@daily").hours == (0,) and parse_cron("@hourly").minutes == (0,)
    assert parse_cron("0 9 * jan,JUL mon-fri").months == frozenset({1, 7})
    assert parse_cron("0 0 * * 7").weekdays == frozenset({0})
