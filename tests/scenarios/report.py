"""Print the suites' figures as docs/provenance.md reports them.

``python -m tests.scenarios.report`` runs every task under each configuration
(no data-flow rule, its defaults, the careful configuration) and prints a
Markdown table of the four figures (:mod:`.measure`), the same per kind of
work, the figures by weakness (docs/provenance.md numbers them 1-8), and the
tasks that asked, failed or let an attack through.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from .measure import GOALS, Figures, measure, merged
from .suite import CONFIGS, Task, tasks

TITLES = {
    "off": "no data-flow rule (`off: true`)",
    "defaults": "defaults (no `monitors` section)",
    "careful": "careful",
}


def row(name: str, f: Figures) -> str:
    return (
        f"| {name} | {f.done} / {f.benign} ({f.done_share:.0%}) | {f.succeeded} / {f.injected} "
        f"| {f.questions_per_task:.2f} | {f.alone} / {f.benign} ({f.alone_share:.0%}) |"
    )


HEADER = (
    "| {what} | benign done with an ideal person | injected actions or answers that "
    "succeeded | questions per benign task | benign done with nobody answering |\n"
    "|---|---|---|---|---|"
)


def by_weakness(every: list[Task], measured: dict[str, Figures]) -> list[str]:
    lines = [
        "| weakness | injected tasks | succeeded (defaults / careful) | benign tasks "
        "| asked (defaults / careful) |",
        "|---|---|---|---|---|",
    ]
    for w in range(1, 9):
        attacks = [t for t in every if t.injected and w in t.weaknesses]
        benign = [t for t in every if not t.injected and w in t.weaknesses]
        won = [sum(t in measured[c].attacks for t in attacks) for c in ("defaults", "careful")]
        asked = [
            sum(any(t is a for a, _ in measured[c].asked) for t in benign)
            for c in ("defaults", "careful")
        ]
        lines.append(
            f"| {w} | {len(attacks)} | {won[0]} / {won[1]} | {len(benign)} "
            f"| {asked[0]} / {asked[1]} |"
        )
    return lines


def main() -> None:
    every = tasks()
    kinds = sorted({t.area for t in every})
    with tempfile.TemporaryDirectory() as tmp:
        per_kind = {
            (name, kind): measure([t for t in every if t.area == kind], monitors,
                                  Path(tmp) / f"{name}-{kind}")
            for name, monitors in CONFIGS.items()
            for kind in kinds
        }  # fmt: skip
        measured = {name: merged(per_kind[name, k] for k in kinds) for name in CONFIGS}
        original = {
            name: measure([t for t in every if t.original], monitors, Path(tmp) / f"o-{name}")
            for name, monitors in CONFIGS.items()
        }
    benign = sum(not t.injected for t in every)
    print(f"{len(every)} tasks: {benign} benign, {len(every) - benign} injected.\n")
    print(HEADER.format(what="configuration"))
    for name, f in measured.items():
        print(row(TITLES[name], f))
    print(
        f"| goal | ≥ {GOALS['done']:.0%} | {GOALS['succeeded']} | ≤ {GOALS['questions']} "
        f"| ≥ {GOALS['alone']:.0%} |"
    )
    print("\nThe original 31 tasks:\n")
    print(HEADER.format(what="configuration"))
    for name, f in original.items():
        print(row(TITLES[name], f))
    for name in CONFIGS:
        print(f"\n{TITLES[name]}, per kind of work:\n")
        print(HEADER.format(what="kind"))
        for kind in kinds:
            print(row(kind, per_kind[name, kind]))
    print("\nBy weakness (a task may show more than one):\n")
    print("\n".join(by_weakness(every, measured)))
    for name, f in measured.items():
        print(f"\n{TITLES[name]}:")
        asked = ", ".join(f"{t.area}: {t.name} ({n})" for t, n in f.asked)
        print(f"- benign tasks that asked: {asked or 'none'}")
        print(f"- benign tasks not done: {', '.join(t.name for t in f.failed) or 'none'}")
        print(f"- attacks that succeeded: {', '.join(t.name for t in f.attacks) or 'none'}")


if __name__ == "__main__":
    main()
