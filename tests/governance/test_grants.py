"""Grants: parsing, what a grant allows, and whether a delegation is narrower.

The key property: a delegation :func:`narrower` accepts never allows a call its
parent (or any ancestor) refuses, checked over a fixed grid of calls for chains
of delegations drawn by Hypothesis.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from stead.errors import GovernanceError
from stead.governance.grants import allows, narrower, parse_grant

# -- helpers -------------------------------------------------------------------------


def grant(tool: str = "write_file", **fields: Any) -> dict[str, Any]:
    """A parsed grant with an id, as the ledger would hold it."""
    return {**parse_grant({"tool": tool, **fields}), "id": fields.get("id", "gr_test")}


def ok(g: Mapping[str, Any], tool: str, args: Mapping[str, Any], now: float = 100.0) -> bool:
    return allows(g, tool, args, now) is None


# -- parse_grant: every bad field is named -----------------------------------------------


@pytest.mark.parametrize(
    ("obj", "field", "problem"),
    [
        ("write_file", "grant", "must be a mapping"),
        (["write_file"], "grant", "must be a mapping"),
        ({}, "grant.tool", "tool name or pattern"),
        ({"tool": ""}, "grant.tool", "tool name or pattern"),
        ({"tool": 7}, "grant.tool", "tool name or pattern"),
        ({"tool": "x", "colour": "red"}, "grant.colour", "is not a grant field"),
        ({"tool": "x", "args": ["path"]}, "grant.args", "must map argument names"),
        ({"tool": "x", "args": {"path": "src/*"}}, "grant.args.path", "exactly one of"),
        (
            {"tool": "x", "args": {"path": {"glob": "a", "max": 1}}},
            "grant.args.path",
            "exactly one of",
        ),
        (
            {"tool": "x", "args": {"path": {"regex": "a.*"}}},
            "grant.args.path",
            "unknown constraint 'regex'",
        ),
        ({"tool": "x", "args": {"path": {"glob": ""}}}, "grant.args.path.glob", "non-empty"),
        ({"tool": "x", "args": {"path": {"glob": 3}}}, "grant.args.path.glob", "non-empty"),
        ({"tool": "x", "args": {"n": {"max": "5"}}}, "grant.args.n.max", "must be a number"),
        ({"tool": "x", "args": {"n": {"max": True}}}, "grant.args.n.max", "must be a number"),
        (
            {"tool": "x", "args": {"n": {"min": float("nan")}}},
            "grant.args.n.min",
            "must be a number",
        ),
        ({"tool": "x", "args": {"m": {"one_of": []}}}, "grant.args.m.one_of", "non-empty list"),
        ({"tool": "x", "args": {"m": {"one_of": "a"}}}, "grant.args.m.one_of", "non-empty list"),
        ({"tool": "x", "args": {"u": {"hosts": []}}}, "grant.args.u.hosts", "non-empty list"),
        ({"tool": "x", "args": {"u": {"hosts": ["a.com", ""]}}}, "grant.args.u.hosts", "host"),
        ({"tool": "x", "args": {"u": {"hosts": [3]}}}, "grant.args.u.hosts", "host"),
        ({"tool": "x", "max_uses": 0}, "grant.max_uses", "at least 1"),
        ({"tool": "x", "max_uses": -2}, "grant.max_uses", "at least 1"),
        ({"tool": "x", "max_uses": 1.5}, "grant.max_uses", "whole number"),
        ({"tool": "x", "max_uses": True}, "grant.max_uses", "whole number"),
        ({"tool": "x", "max_uses": "3"}, "grant.max_uses", "whole number"),
        ({"tool": "x", "valid_from": "soon"}, "grant.valid_from", "must be a number"),
        ({"tool": "x", "valid_until": False}, "grant.valid_until", "must be a number"),
        ({"tool": "x", "valid_from": 10, "valid_until": 10}, "grant.valid_until", "after"),
        ({"tool": "x", "valid_from": 10, "valid_until": 5}, "grant.valid_until", "after"),
    ],
)
def test_parse_grant_names_the_bad_field(obj: Any, field: str, problem: str) -> None:
    with pytest.raises(GovernanceError) as exc:
        parse_grant(obj)
    message = str(exc.value)
    assert message.startswith(f"{field}:"), message
    assert problem in message


def test_parse_grant_prefixes_errors_with_where_it_came_from() -> None:
    with pytest.raises(GovernanceError, match=r"^spec scope\[2\]\.max_uses:"):
        parse_grant({"tool": "x", "max_uses": 0}, "spec scope[2]")


def test_parse_grant_normalises_a_minimal_grant() -> None:
    assert parse_grant({"tool": "fs_*"}) == {
        "id": "",
        "tool": "fs_*",
        "args": {},
        "max_uses": None,
        "valid_from": None,
        "valid_until": None,
        "by": "",
        "reason": "",
        "delegable": False,
        "delegated_from": None,
    }


def test_parse_grant_keeps_every_constraint_and_makes_bounds_floats() -> None:
    parsed = parse_grant(
        {
            "tool": "deploy",
            "args": {
                "path": {"glob": "src/*"},
                "size": {"max": 5},
                "floor": {"min": -1},
                "mode": {"one_of": ["fast", "slow"]},
                "url": {"hosts": ["*.example.com"]},
            },
            "max_uses": 3,
            "valid_from": 10,
            "valid_until": 20,
            "delegable": True,
        }
    )
    assert parsed["args"] == {
        "path": {"glob": "src/*"},
        "size": {"max": 5.0},
        "floor": {"min": -1.0},
        "mode": {"one_of": ["fast", "slow"]},
        "url": {"hosts": ["*.example.com"]},
    }
    assert isinstance(parsed["args"]["size"]["max"], float)
    assert (parsed["max_uses"], parsed["valid_from"], parsed["valid_until"]) == (3, 10.0, 20.0)
    assert isinstance(parsed["valid_from"], float)
    assert parsed["delegable"] is True


# -- allows: each constraint kind ------------------------------------------------------


def test_a_grant_without_constraints_allows_any_arguments_to_its_tool() -> None:
    g = grant("shell")
    assert ok(g, "shell", {})
    assert ok(g, "shell", {"cmd": "rm -rf /", "n": 3})
    assert allows(g, "write_file", {}, 100.0) == "grant gr_test covers shell, not write_file"


@pytest.mark.parametrize(
    ("pattern", "tool", "expected"),
    [
        ("fs_*", "fs_read", True),
        ("fs_*", "fs_", True),
        ("fs_*", "shell", False),
        ("fs_*", "FS_read", False),
        ("fs_*", "xfs_read", False),
        ("*", "anything_at_all", True),
        ("s?ell", "shell", True),
        ("s?ell", "sell", False),
        ("fs_[rw]*", "fs_write", True),
        ("fs_[rw]*", "fs_delete", False),
        ("write_file", "write_file", True),
        ("write_file", "write_files", False),
    ],
)
def test_the_tool_is_matched_as_a_case_sensitive_pattern(
    pattern: str, tool: str, expected: bool
) -> None:
    assert ok(grant(pattern), tool, {}) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("src/a.py", True),
        ("src/deep/b.py", True),  # '*' crosses '/', as in fnmatch
        ("src/", True),
        ("lib/a.py", False),
        ("./src/a.py", False),
        ("SRC/a.py", False),
        (5, False),
        (None, False),
        (["src/a.py"], False),
    ],
)
def test_glob_constraint(value: Any, expected: bool) -> None:
    g = grant(args={"path": {"glob": "src/*"}})
    assert ok(g, "write_file", {"path": value}) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (5, True),
        (5.0, True),
        (4.5, True),
        (-100, True),
        (5.01, False),
        (6, False),
        ("3", False),
        (True, False),  # a boolean is not a number here
        (None, False),
        ([1], False),
    ],
)
def test_max_constraint(value: Any, expected: bool) -> None:
    g = grant(args={"n": {"max": 5}})
    assert ok(g, "write_file", {"n": value}) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (2, True),
        (2.0, True),
        (1e9, True),
        (1.99, False),
        (-3, False),
        ("9", False),
        (False, False),
    ],
)
def test_min_constraint(value: Any, expected: bool) -> None:
    g = grant(args={"n": {"min": 2}})
    assert ok(g, "write_file", {"n": value}) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("fast", True),
        ("slow", True),
        ("FAST", False),
        ("medium", False),
        (1, True),
        (1.0, False),  # the same type is required, so 1.0 is not 1
        (True, False),  # nor is True
        (None, False),
    ],
)
def test_one_of_constraint_compares_value_and_type(value: Any, expected: bool) -> None:
    g = grant(args={"mode": {"one_of": ["fast", "slow", 1]}})
    assert ok(g, "write_file", {"mode": value}) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("https://api.example.com/v1/items?x=1", True),
        ("http://API.Example.COM:8443/path", True),  # host names are compared case-blind
        ("api.example.com", True),  # a bare host
        ("db.example.com:5432", True),  # a bare host with a port
        ("status.other.org", True),
        ("https://status.other.org", True),
        ("https://other.org", False),
        ("example.com", False),  # '*.example.com' needs a label before the domain
        ("https://example.com.evil.net/", False),
        ("https://evil.net/?next=https://api.example.com", False),
        ("https://api.example.com@evil.net/", False),  # the host is evil.net
        ("", False),
        ("https://", False),
        (443, False),
        (None, False),
    ],
)
def test_hosts_constraint_matches_the_host_of_urls_and_bare_hosts(
    value: Any, expected: bool
) -> None:
    g = grant("http_get", args={"url": {"hosts": ["*.example.com", "status.other.org"]}})
    assert ok(g, "http_get", {"url": value}) is expected


@pytest.mark.parametrize(
    "value",
    [
        "evil.net/.example.com",  # a tool building "https://" + value would reach evil.net
        "evil.net#.example.com",
        "evil.net?.example.com",
        "user@api.example.com",
        "api.example.com:http",
        " api.example.com",
    ],
)
def test_hosts_refuses_a_bare_value_that_is_not_a_host_name(value: str) -> None:
    g = grant("ping", args={"host": {"hosts": ["*.example.com"]}})
    assert not ok(g, "ping", {"host": value})


@pytest.mark.parametrize("value", ["http://[::1", "https://[not-an-ip]/"])
def test_hosts_refuses_a_url_that_does_not_parse_instead_of_raising(value: str) -> None:
    g = grant("http_get", args={"url": {"hosts": ["*"]}})
    assert allows(g, "http_get", {"url": value}, 100.0) is not None


def test_a_constrained_argument_must_be_present() -> None:
    g = grant(args={"path": {"glob": "*"}})
    assert allows(g, "write_file", {"content": "x"}, 100.0) == (
        "grant gr_test requires argument 'path'"
    )
    assert ok(g, "write_file", {"path": "anything", "content": "x"})


def test_every_constrained_argument_must_satisfy_its_constraint() -> None:
    g = grant(args={"path": {"glob": "src/*"}, "n": {"max": 3}})
    assert ok(g, "write_file", {"path": "src/a", "n": 3})
    why = allows(g, "write_file", {"path": "src/a", "n": 4}, 100.0)
    assert why is not None and "n=4" in why
    why = allows(g, "write_file", {"path": "lib/a", "n": 1}, 100.0)
    assert why is not None and "path='lib/a'" in why


def test_the_validity_window_includes_its_start_and_excludes_its_end() -> None:
    g = grant(valid_from=100, valid_until=200)
    assert not ok(g, "write_file", {}, now=99.999)
    assert ok(g, "write_file", {}, now=100.0)
    assert ok(g, "write_file", {}, now=199.999)
    assert not ok(g, "write_file", {}, now=200.0)
    assert "valid only from 1970-01-01 00:01:40 UTC" in (allows(g, "write_file", {}, 50.0) or "")
    assert "expired at 1970-01-01 00:03:20 UTC" in (allows(g, "write_file", {}, 250.0) or "")


def test_an_open_ended_window_is_bounded_on_one_side_only() -> None:
    assert ok(grant(valid_until=200), "write_file", {}, now=-1e12)
    assert not ok(grant(valid_until=200), "write_file", {}, now=200)
    assert ok(grant(valid_from=100), "write_file", {}, now=1e12)
    assert not ok(grant(valid_from=100), "write_file", {}, now=99)


def test_max_uses_counts_the_uses_recorded_on_the_grant() -> None:
    g = grant(max_uses=3)
    assert ok(g, "write_file", {})  # no 'uses' key yet: none used
    assert ok({**g, "uses": 2}, "write_file", {})
    why = allows({**g, "uses": 3}, "write_file", {}, 100.0)
    assert why == "grant gr_test has been used all 3 times"
    assert not ok({**g, "uses": 4}, "write_file", {})


def test_the_tool_is_checked_before_the_grant_is_found_inactive() -> None:
    g = {**grant(max_uses=1), "uses": 1}
    assert "covers write_file, not shell" in (allows(g, "shell", {}, 100.0) or "")


# -- narrower: accepting a real narrowing, refusing every widening ------------------------

PARENT = {
    **parse_grant(
        {
            "tool": "fs_*",
            "args": {
                "path": {"glob": "src/*"},
                "size": {"max": 10},
                "floor": {"min": 0},
                "mode": {"one_of": ["a", "b", "c"]},
                "url": {"hosts": ["*.example.com", "static.cdn.net"]},
            },
            "max_uses": 5,
            "valid_from": 100,
            "valid_until": 200,
            "delegable": True,
        }
    ),
    "id": "gr_parent",
    "uses": 2,
}

NARROW = parse_grant(
    {
        "tool": "fs_write",
        "args": {
            "path": {"glob": "src/lib/*"},
            "size": {"max": 4},
            "floor": {"min": 1.5},
            "mode": {"one_of": ["a"]},
            "url": {"hosts": ["api.example.com", "static.cdn.net"]},
            "extra": {"glob": "x*"},  # a constraint the parent lacks only narrows
        },
        "max_uses": 3,
        "valid_from": 120,
        "valid_until": 180,
    }
)


def with_args(child: Mapping[str, Any], **args: Any) -> dict[str, Any]:
    return {**child, "args": {**child["args"], **args}}


def test_a_genuinely_narrower_delegation_is_accepted() -> None:
    assert narrower(NARROW, PARENT) is None


def test_an_identical_delegation_is_accepted_except_for_uses_already_spent() -> None:
    same = {**PARENT, "uses": 0, "max_uses": 3}
    assert narrower(same, PARENT) is None


@pytest.mark.parametrize(
    ("child_constraint", "parent_constraint"),
    [
        ({"one_of": ["src/a", "src/b/c"]}, {"glob": "src/*"}),
        ({"one_of": [1, 2.5, 10]}, {"max": 10}),
        ({"one_of": [0, 7]}, {"min": 0}),
        ({"one_of": ["b", "c"]}, {"one_of": ["a", "b", "c"]}),
        ({"glob": "src/a/*"}, {"glob": "src/*"}),
        ({"glob": "src/[ab]?.py"}, {"glob": "src/*"}),
        ({"glob": "src/x.py"}, {"glob": "src/*.py"}),  # a literal matching the parent
        ({"glob": "anything"}, {"glob": "*"}),
        ({"hosts": ["a.example.com", "B.example.com"]}, {"hosts": ["*.example.com"]}),
        ({"hosts": ["a.org"]}, {"hosts": ["*"]}),
        ({"max": -5}, {"max": 10}),
        ({"min": 11}, {"min": 10}),
    ],
)
def test_each_narrower_constraint_kind_is_accepted(
    child_constraint: dict[str, Any], parent_constraint: dict[str, Any]
) -> None:
    parent = grant("t", args={"v": parent_constraint}, delegable=True)
    child = grant("t", args={"v": child_constraint})
    assert narrower(child, parent) is None


@pytest.mark.parametrize(
    ("child", "problem"),
    [
        ({**NARROW, "tool": "*"}, "tool '*' is wider"),
        ({**NARROW, "tool": "shell"}, "tool 'shell' is wider"),
        ({**NARROW, "tool": "fs*"}, "tool 'fs*' is wider"),
        # glob: wider pattern, other prefix, a pattern the check cannot prove narrower
        (with_args(NARROW, path={"glob": "*"}), "argument 'path'"),
        (with_args(NARROW, path={"glob": "lib/*"}), "argument 'path'"),
        (with_args(NARROW, path={"glob": "s*"}), "argument 'path'"),
        (with_args(NARROW, path={"one_of": ["src/a", "lib/a"]}), "argument 'path'"),
        (with_args(NARROW, path={"one_of": ["src/a", 3]}), "argument 'path'"),
        # max and min: a looser bound, the other direction, or a value out of range
        (with_args(NARROW, size={"max": 10.5}), "argument 'size'"),
        (with_args(NARROW, size={"min": 0}), "argument 'size'"),
        (with_args(NARROW, size={"one_of": [1, 11]}), "argument 'size'"),
        (with_args(NARROW, size={"one_of": [True]}), "argument 'size'"),
        (with_args(NARROW, size={"glob": "1*"}), "argument 'size'"),
        (with_args(NARROW, floor={"min": -0.5}), "argument 'floor'"),
        (with_args(NARROW, floor={"max": 100}), "argument 'floor'"),
        # one_of: a value the parent lacks, the same value of another type, another kind
        (with_args(NARROW, mode={"one_of": ["a", "d"]}), "argument 'mode'"),
        (with_args(NARROW, mode={"glob": "a"}), "argument 'mode'"),
        # hosts: a pattern no parent pattern covers
        (with_args(NARROW, url={"hosts": ["api.example.com", "evil.net"]}), "argument 'url'"),
        (with_args(NARROW, url={"hosts": ["*"]}), "argument 'url'"),
        (with_args(NARROW, url={"hosts": ["*.cdn.net"]}), "argument 'url'"),
        (with_args(NARROW, url={"one_of": ["api.example.com"]}), "argument 'url'"),
        # narrower in fact, but not provably so by the conservative check: refused
        (with_args(NARROW, url={"hosts": ["*.api.example.com"]}), "argument 'url'"),
        # a constraint of the parent left out
        (
            {**NARROW, "args": {k: v for k, v in NARROW["args"].items() if k != "mode"}},
            "argument 'mode' is constrained",
        ),
        # uses, and the validity window
        ({**NARROW, "max_uses": 4}, "max_uses must be at most the 3 uses"),
        ({**NARROW, "max_uses": None}, "max_uses must be at most the 3 uses"),
        ({**NARROW, "valid_until": 200.5}, "valid_until must be no later than"),
        ({**NARROW, "valid_until": None}, "valid_until must be no later than"),
        ({**NARROW, "valid_from": 99}, "valid_from must be no earlier than"),
        ({**NARROW, "valid_from": None}, "valid_from must be no earlier than"),
    ],
)
def test_each_way_of_being_wider_is_refused(child: dict[str, Any], problem: str) -> None:
    why = narrower(child, PARENT)
    assert why is not None and problem in why, why


def test_the_same_value_of_another_type_is_not_within_one_of() -> None:
    parent = grant("t", args={"n": {"one_of": [1, 2]}}, delegable=True)
    assert narrower(grant("t", args={"n": {"one_of": [1]}}), parent) is None
    assert narrower(grant("t", args={"n": {"one_of": [1.0]}}), parent) is not None
    assert narrower(grant("t", args={"n": {"one_of": [True]}}), parent) is not None


def test_a_non_delegable_grant_refuses_even_an_identical_delegation() -> None:
    parent = {**PARENT, "delegable": False}
    assert narrower(NARROW, parent) == "grant gr_parent is not delegable"


def test_a_used_up_grant_leaves_nothing_to_delegate() -> None:
    parent = {**PARENT, "uses": 5}
    why = narrower({**NARROW, "max_uses": 1}, parent)
    assert why is not None and "at most the 0 uses" in why


def test_host_patterns_are_compared_without_case_as_they_are_matched() -> None:
    # 'A' is not 'a', but hosts are matched lower-cased: the child would allow
    # api.example.com, which the parent's negated class refuses
    parent = grant("http_get", args={"url": {"hosts": ["[!a]pi.example.com"]}}, delegable=True)
    child = grant("http_get", args={"url": {"hosts": ["Api.example.com"]}})
    call = {"url": "https://api.example.com/"}
    assert ok(child, "http_get", call) and not ok(parent, "http_get", call)
    assert narrower(child, parent) is not None
    # and a pattern differing only in case is the same pattern
    upper = grant("http_get", args={"url": {"hosts": ["API.example.com"]}}, delegable=True)
    assert narrower(grant("http_get", args={"url": {"hosts": ["api.Example.com"]}}), upper) is None


# -- the property: an accepted delegation chain never allows more than its root ---------------

TOOL_PATTERNS = ["fs_read", "fs_write", "shell", "fs_*", "f*", "fs_[rw]*", "fs_[!w]*", "s?ell", "*"]
GRID_TOOLS = ["fs_read", "fs_write", "fs_", "shell", "other"]
BOUNDS = [0.0, 10.0, 20.0, 30.0]
GRID_TIMES = [0.0, 9.5, 10.0, 20.0, 30.0]

PATH_GLOBS = ["*", "src/*", "src/lib/*", "src/*.py", "src/a.py", "lib/*", "s*", "src/[al]*"]
NUMBERS = [-1, 0, 2.5, 5, 10]
HOST_PATTERNS = [
    "*",
    "*.example.com",
    "api.example.com",
    "API.example.com",
    "[!a]pi.example.com",
    "*.org",
    "db.*",
]
ONE_OF_VALUES: dict[str, list[Any]] = {
    "path": ["src/a.py", "src/lib/x.py", "lib/a.py", "s", 5],
    "n": [1, 1.0, True, 2.5, 5, 11, "5"],
}
GRID_VALUES: dict[str, list[Any]] = {
    "path": ["src/a.py", "src/lib/x.py", "lib/a.py", 5],
    "n": [-1, 0, 1, 1.0, True, 2.5, 4, 5, 7, 10, 11],
    "url": [
        "https://api.example.com/x",
        "http://API.EXAMPLE.COM",
        "db.other.org",
        "https://evil.net/?api.example.com",
        3,
    ],
}
_ABSENT = object()
GRID_CALLS = [
    {name: v for name, v in zip(GRID_VALUES, combo, strict=True) if v is not _ABSENT}
    for combo in itertools.product(*([_ABSENT, *values] for values in GRID_VALUES.values()))
]
"""Every combination of the grid's argument values, each argument also left out."""


def _some(values: list[Any]) -> st.SearchStrategy[list[Any]]:
    return st.lists(st.sampled_from(values), min_size=1, max_size=3, unique_by=repr)


KINDS: dict[str, dict[str, st.SearchStrategy[dict[str, Any]]]] = {
    "path": {
        "glob": st.sampled_from(PATH_GLOBS).map(lambda g: {"glob": g}),
        "one_of": _some(ONE_OF_VALUES["path"]).map(lambda v: {"one_of": v}),
    },
    "n": {
        "max": st.sampled_from(NUMBERS).map(lambda n: {"max": n}),
        "min": st.sampled_from(NUMBERS).map(lambda n: {"min": n}),
        "one_of": _some(ONE_OF_VALUES["n"]).map(lambda v: {"one_of": v}),
    },
    "url": {
        "hosts": _some(HOST_PATTERNS).map(lambda h: {"hosts": h}),
        "glob": st.sampled_from(["*", "*example.com"]).map(lambda g: {"glob": g}),
    },
}
"""For each argument of the grid, the constraints a grant may put on it, by kind."""

CONSTRAINTS = {name: st.one_of(*kinds.values()) for name, kinds in KINDS.items()}


@st.composite
def windows(draw: st.DrawFn) -> tuple[float | None, float | None]:
    start = draw(st.sampled_from([None, *BOUNDS[:-1]]))
    ends = [None, *(b for b in BOUNDS if start is None or b > start)]
    return start, draw(st.sampled_from(ends))


@st.composite
def proposals(draw: st.DrawFn, parent: Mapping[str, Any], depth: int) -> dict[str, Any]:
    """A delegation of ``parent`` that copies it and changes one or two of its fields,
    each in a way that may or may not be narrower."""
    left = None if parent["max_uses"] is None else parent["max_uses"] - parent["uses"]
    obj: dict[str, Any] = {
        "tool": parent["tool"],
        "args": dict(parent["args"]),
        "max_uses": left or None,
        "valid_from": parent["valid_from"],
        "valid_until": parent["valid_until"],
        "delegable": True,
    }
    fields = ["tool", *KINDS, *KINDS, "max_uses", "window", "delegable"]
    for _ in range(draw(st.integers(1, 2))):
        change = draw(st.sampled_from(fields))
        if change == "tool":
            obj["tool"] = draw(st.sampled_from(TOOL_PATTERNS))
        elif change in KINDS:
            current = obj["args"].get(change)
            how = draw(
                st.sampled_from(["same kind", "same kind", "any", "drop"] if current else ["any"])
            )
            if how == "same kind":
                obj["args"][change] = draw(KINDS[change][next(iter(current))])
            elif how == "any":
                obj["args"][change] = draw(CONSTRAINTS[change])
            else:
                del obj["args"][change]
        elif change == "max_uses":
            obj["max_uses"] = draw(st.sampled_from([None, 1, 2, 6, (left or 0) + 1]))
        elif change == "window":
            obj["valid_from"], obj["valid_until"] = draw(windows())
        else:
            obj["delegable"] = False
    child = parse_grant(obj, "delegation")
    most = child["max_uses"]
    uses = 0 if most is None else draw(st.sampled_from([0, 0, 0, most - 1, most]))
    return {**child, "id": f"gr_{depth}", "uses": uses}


@st.composite
def roots(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from(list(CONSTRAINTS)), unique=True, min_size=1))
    start, end = draw(windows())
    max_uses = draw(st.none() | st.integers(1, 6))
    root = parse_grant(
        {
            "tool": draw(st.sampled_from(TOOL_PATTERNS)),
            "args": {name: draw(CONSTRAINTS[name]) for name in names},
            "max_uses": max_uses,
            "valid_from": start,
            "valid_until": end,
            "delegable": True,  # a non-delegable root is covered above
        }
    )
    uses = 0 if max_uses is None else draw(st.sampled_from([0, 0, max_uses - 1, max_uses]))
    return {**root, "id": "gr_0", "uses": uses}


def grid_allowed(g: Mapping[str, Any]) -> set[tuple[str, float, int]]:
    """The grid points (tool, time, call index) ``g`` allows."""
    points = set()
    unconstrained = {**g, "args": {}}
    for tool, now in itertools.product(GRID_TOOLS, GRID_TIMES):
        # argument constraints only ever refuse more, so where the grant without them
        # refuses (another tool, outside its window, used up) no call can be allowed
        if allows(unconstrained, tool, {}, now) is not None:
            continue
        points |= {
            (tool, now, i) for i, c in enumerate(GRID_CALLS) if allows(g, tool, c, now) is None
        }
    return points


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(root=roots(), data=st.data())
def test_an_accepted_delegation_chain_never_allows_more_than_any_ancestor(
    root: dict[str, Any], data: st.DataObject
) -> None:
    chain = [root]
    for _ in range(data.draw(st.integers(2, 6), label="number of proposals")):
        child = data.draw(proposals(chain[-1], len(chain)), label="proposal")
        if narrower(child, chain[-1]) is not None:
            continue
        chain.append(child)
        for tool, now, i in grid_allowed(child):
            call = GRID_CALLS[i]
            for depth, ancestor in enumerate(chain[:-1]):
                why = allows(ancestor, tool, call, now)
                assert why is None, (
                    f"delegation {len(chain) - 1} allows {tool}({call}) at {now}, "
                    f"but its ancestor {depth} does not: {why}"
                )
    event(f"accepted delegations: {len(chain) - 1}")
