"""A schedule's definition: when it is due, what it says, and what it does when late.

Read from a mapping (a CLI's flags, an HTTP body, a Python call), checked field
by field, and kept as plain JSON in the schedule's row and, digested, in the
journal of the agent it wakes. Exactly one of ``cron``, ``every`` and ``at``
says when it is due:

* ``cron``: a cron line (:mod:`stead.schedules.cron`) in the time zone ``tz``
  (an IANA name, UTC by default);
* ``every``: an interval (``90s``, ``15m``, ``2h``, ``1d`` or seconds), due at
  ``start`` plus whole intervals (``start`` defaults to when it was made, so the
  first run is one interval later);
* ``at``: one time, once.

``catch_up`` says what happens to due times that passed while no worker ran
(later than ``grace`` after they fell due): ``skip`` them, run ``one`` (the
latest), or ``all`` (at most ``max_catch_up``, the latest). ``overlap`` says
what happens when a time falls due while the previous run has not finished:
``skip`` it, ``queue`` it until that run ends, or ``cancel_previous`` (a
schedule of fresh agents only: the previous run's agent is cancelled). A
``jitter`` spreads each firing over that many seconds after its due time, the
same for every worker (seeded by the schedule and the time).
"""

from __future__ import annotations

import datetime as dt
import hashlib
import math
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from ..errors import UsageError
from .cron import Cron, parse_cron

CATCH_UP = ("skip", "one", "all")
OVERLAP = ("skip", "queue", "cancel_previous")
FIELDS = ("cron", "tz", "every", "start", "at", "message", "catch_up", "max_catch_up",
          "overlap", "jitter", "grace", "name")  # fmt: skip
MESSAGE_CHARS = 8_000
MAX_CATCH_UP = 1_000
_DAY = 86_400.0
_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd]?)$")
_UNIT = {"": 1.0, "s": 1.0, "m": 60.0, "h": 3600.0, "d": _DAY}


@dataclass(frozen=True, slots=True)
class Definition:
    """A checked schedule definition (see the module's docstring)."""

    cron: str | None = None
    tz: str = "UTC"
    every: float | None = None
    start: float | None = None
    at: float | None = None
    message: str = ""
    catch_up: str = "one"
    max_catch_up: int = 10
    overlap: str = "skip"
    jitter: float = 0.0
    grace: float = 60.0
    name: str = ""

    def to_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    @property
    def zone(self) -> ZoneInfo:
        return ZoneInfo(self.tz)

    def after(self, instant: float, cron: Cron | None = None) -> float | None:
        """The first due time strictly after ``instant`` (None: there is none)."""
        if self.cron is not None:
            return (cron or parse_cron(self.cron)).after(instant, self.zone)
        if self.every is not None:
            start = self.start if self.start is not None else 0.0
            if instant < start:
                return start
            return start + (math.floor((instant - start) / self.every) + 1) * self.every
        return self.at if self.at is not None and self.at > instant else None

    def upcoming(self, instant: float, count: int) -> list[float]:
        """The next ``count`` due times after ``instant`` (fewer if it ends)."""
        cron = parse_cron(self.cron) if self.cron is not None else None
        times: list[float] = []
        due = self.after(instant, cron)
        while due is not None and len(times) < count:
            times.append(due)
            due = self.after(due, cron)
        return times

    def fire_time(self, schedule_id: str, due: float) -> float:
        """When a due time fires: the due time plus its share of the jitter."""
        if self.jitter <= 0:
            return due
        seed = hashlib.sha256(f"{schedule_id}\x00{float(due)!r}".encode()).digest()
        return due + int.from_bytes(seed[:8], "big") / 2**64 * self.jitter

    def when(self) -> str:
        """The timing in a few words, for listings."""
        if self.cron is not None:
            return f"cron {self.cron} ({self.tz})"
        if self.every is not None:
            return f"every {_shown(self.every)}"
        return f"once at {_iso(self.at or 0.0)}"


def parse_definition(raw: Mapping[str, Any], *, now: float, for_spec: bool) -> Definition:
    """A :class:`Definition` from ``raw``, or a :class:`UsageError` naming the field,
    what was wrong and what it takes. ``for_spec``: the schedule makes a fresh agent
    per run (which may go without a message, and may cancel the previous run)."""
    unknown = sorted(set(raw) - set(FIELDS))
    if unknown:
        raise UsageError(
            f"a schedule has no field {unknown[0]!r}; its fields are {', '.join(FIELDS)}"
        )
    timings = [k for k in ("cron", "every", "at") if raw.get(k) is not None]
    if len(timings) != 1:
        raise UsageError(
            "a schedule needs exactly one of cron (a cron line), every (an interval) "
            f"and at (one time); it has {', '.join(timings) or 'none'}"
        )
    tz = _text(raw.get("tz", "UTC"), "tz", 64)
    try:
        zone = ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        raise UsageError(
            f"tz {tz!r} is not a time zone; use an IANA name like Europe/Paris or UTC"
        ) from None
    cron = raw.get("cron")
    if cron is not None:
        cron = parse_cron(_text(cron, "cron", 200)).text
    every = None if raw.get("every") is None else _seconds(raw["every"], "every")
    if every is not None and every < 1:
        raise UsageError("every must be at least 1 second")
    start = None if raw.get("start") is None else _time(raw["start"], "start", zone)
    if every is not None and start is None:
        start = now
    if start is not None and every is None:
        raise UsageError("start goes with every (the interval it counts from)")
    at = None if raw.get("at") is None else _time(raw["at"], "at", zone)
    grace = _seconds(raw.get("grace", 60), "grace", allow_zero=True)
    if at is not None and at < now - grace:
        raise UsageError(f"at {_iso(at)} has passed; give a time from now on")
    message = _text(raw.get("message", ""), "message", MESSAGE_CHARS)
    if not message.strip() and not for_spec:
        raise UsageError("a schedule that wakes an agent needs a message: what it should do then")
    catch_up = _choice(raw.get("catch_up", "one"), "catch_up", CATCH_UP)
    overlap = _choice(raw.get("overlap", "skip"), "overlap", OVERLAP)
    if overlap == "cancel_previous" and not for_spec:
        raise UsageError(
            "overlap cancel_previous is for a schedule of fresh agents (--spec): an agent "
            "woken again cannot cancel its own earlier run without ending; use skip or queue"
        )
    most = raw.get("max_catch_up", 10)
    if isinstance(most, bool) or not isinstance(most, int) or not 1 <= most <= MAX_CATCH_UP:
        raise UsageError(f"max_catch_up must be a whole number from 1 to {MAX_CATCH_UP}")
    jitter = _seconds(raw.get("jitter", 0), "jitter", allow_zero=True)
    if jitter > _DAY:
        raise UsageError("jitter must be at most a day (1d)")
    definition = Definition(
        cron=cron, tz=tz, every=every, start=start, at=at, message=message, catch_up=catch_up,
        max_catch_up=most, overlap=overlap, jitter=jitter, grace=grace,
        name=_text(raw.get("name", ""), "name", 100),
    )  # fmt: skip
    definition.after(now)  # a cron line that never matches is refused now, not at a worker
    return definition


def from_json(body: Mapping[str, Any]) -> Definition:
    """A definition as stored (checked when it was made)."""
    return Definition(**{k: v for k, v in body.items() if k in FIELDS})


def _text(value: Any, name: str, most: int) -> str:
    if not isinstance(value, str):
        raise UsageError(f"{name} must be text")
    if len(value) > most:
        raise UsageError(f"{name} is {len(value)} characters; at most {most} are kept")
    if any(ord(c) < 32 and c not in "\n\t" for c in value):
        raise UsageError(f"{name} holds control characters; remove them")
    return value


def _choice(value: Any, name: str, choices: tuple[str, ...]) -> str:
    if value not in choices:
        raise UsageError(f"{name} must be one of {', '.join(choices)}, not {value!r}")
    return str(value)


def _seconds(value: Any, name: str, *, allow_zero: bool = False) -> float:
    """Seconds from a number or ``90s``, ``15m``, ``2h``, ``1d``."""
    if isinstance(value, bool):
        raise UsageError(f"{name} must be a duration like 90s, 15m, 2h or 1d")
    if isinstance(value, int | float):
        seconds = float(value)
    else:
        m = _DURATION.match(str(value).strip())
        if m is None:
            raise UsageError(
                f"{name} {value!r} is not a duration; write it like 90s, 15m, 2h or 1d"
            )
        seconds = float(m.group(1)) * _UNIT[m.group(2)]
    if not math.isfinite(seconds) or seconds < 0 or (seconds == 0 and not allow_zero):
        raise UsageError(f"{name} must be a duration above 0, like 90s, 15m, 2h or 1d")
    if seconds > 366 * _DAY:
        raise UsageError(f"{name} is longer than a year; use a cron line for rarer times")
    return seconds


def _time(value: Any, name: str, zone: ZoneInfo) -> float:
    """Seconds since the epoch from a number or an ISO 8601 time (in ``zone`` if it
    names no offset)."""
    if isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if isinstance(value, str) and len(value) <= 40:
        try:
            when = dt.datetime.fromisoformat(value.strip())
        except ValueError:
            pass
        else:
            return (when if when.tzinfo is not None else when.replace(tzinfo=zone)).timestamp()
    raise UsageError(
        f"{name} must be a time like 2027-01-31T09:00 (in tz) or 2027-01-31T09:00+01:00"
    )


def _iso(instant: float) -> str:
    return dt.datetime.fromtimestamp(instant, dt.UTC).isoformat(timespec="seconds")


def _shown(seconds: float) -> str:
    for unit, size in (("d", _DAY), ("h", 3600.0), ("m", 60.0)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
