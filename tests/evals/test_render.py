"""The reports: every figure where it belongs, charts that parse, and nothing a suite
or a model wrote able to become markup."""

from __future__ import annotations

import copy
import re
import xml.etree.ElementTree as ET
from typing import Any

from stead.evals.aggregate import aggregate
from stead.evals.render_html import html
from stead.evals.render_md import markdown

from .test_aggregate import cell

HOSTILE = '<script>alert("x")</script></svg>&amp;|`'


def summary(real: dict[str, Any]) -> dict[str, Any]:
    odd = copy.deepcopy(real)
    odd["trail"][2] = HOSTILE
    odd["effects"]["repeated"] = ["call_1"]
    odd["adherence"]["approvals_asked"] = 4
    cells = [
        cell(real, "baseline", 0),
        cell(real, "baseline", 1),
        cell(real, "kill", 0),
        cell(odd, "kill", 1),
        cell(real, "compact", 0, metrics=None, not_applicable="a scripted model " + HOSTILE),
        cell(real, HOSTILE.replace("/", ""), 0, kind="move", error=HOSTILE),
    ]
    for c in cells:
        c["task"] = "t" + HOSTILE
    return aggregate(cells, {"name": HOSTILE, "suite": "s.yaml", "runs": 2, "store": "sqlite"})


def test_the_html_page_escapes_everything_and_runs_nothing(real: dict[str, Any]) -> None:
    page = html(summary(real))
    assert "<script" not in page and 'alert("x")' not in page
    assert "&lt;script&gt;" in page
    assert "src=" not in page and "href=" not in page  # it loads nothing
    charts = re.findall(r"<svg .*?</svg>", page, re.S)
    assert len(charts) == 2
    for svg in charts:  # each chart is well-formed XML: no text closed it early
        root = ET.fromstring(svg)
        assert root.tag.endswith("svg")
    assert "Check failed" in page and "1 repeated and 0 lost effects" in page


def test_the_chart_draws_each_condition_with_its_rates(real: dict[str, Any]) -> None:
    page = html(summary(real))
    first = ET.fromstring(re.findall(r"<svg .*?</svg>", page, re.S)[0])
    texts = [t.text for t in first.iter() if t.tag.endswith("text")]
    assert "baseline" in texts and "kill" in texts and "n/a" in texts
    bars = [r for r in first.iter() if r.tag.endswith("rect") and r.get("height") != "12"]
    assert len(bars) == 2 * 3  # baseline, kill and move (its error is one run's): two each
    heights = {float(b.get("height", 0)) for b in bars}
    assert 200.0 in heights  # 100% is the full height


def test_the_markdown_keeps_its_table_whole(real: dict[str, Any]) -> None:
    text = markdown(summary(real))
    rows = [line for line in text.splitlines() if line.startswith("| kill ")]
    assert len(rows) == 1 and rows[0].count(" | ") == 15  # 16 columns, none split by a |
    # injected, completed, adhered, asked (median and range) ... diverged, same outcome
    assert rows[0].startswith("| kill | 100% | 100% | 100% | 2.5 (1 to 4) |")
    assert "| 50% | 100% |" in rows[0]
    assert "approvals asked 2.5 (baseline 1)" in text
    assert "not applicable: a scripted model" in text and "\\|" in text


def test_the_markdown_holds_no_markup_a_viewer_would_render(real: dict[str, Any]) -> None:
    text = markdown(summary(real))
    assert "<script" not in text and "</svg>" not in text
    assert "&lt;script&gt;" in text
