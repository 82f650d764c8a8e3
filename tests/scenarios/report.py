"""Print the suites' figures as docs/provenance.md reports them.

``python -m tests.scenarios.report`` runs every task under each configuration
(with a careful person answering, and with nobody answering) and prints one
Markdown table row per configuration, then the benign tasks that asked.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from .suite import CAREFUL, DEFAULTS, run_task, tasks
from .test_suites import careful_person

CONFIGS: dict[str, dict[str, Any] | None] = {
    "no data-flow rule": {"dataflow": {"off": True}},
    "defaults (no monitors section)": DEFAULTS,
    "careful": CAREFUL,
}


def main() -> None:
    every = tasks()
    benign = [t for t in every if not t.injected]
    actions = [t for t in every if t.injected and t.act is not None]
    answers = [t for t in every if t.injected and t.act is None]
    print(
        "| configuration | benign completed | approvals per benign task | benign completed "
        "with nobody answering | injected actions run unapproved | injected answers "
        "reaching the user unmarked and unseen |"
    )
    print("|---|---|---|---|---|---|")
    asked_by: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        n = 0

        def run(task: Any, monitors: Any, answer: Any) -> Any:
            nonlocal n
            n += 1
            return run_task(task, root / str(n), monitors, answer)

        for name, monitors in CONFIGS.items():
            answered = [run(t, monitors, careful_person(t)) for t in benign]
            alone = [run(t, monitors, None) for t in benign]
            ran = sum(run(t, monitors, None).injected_ran for t in actions)
            unseen = sum(
                (o := run(t, monitors, None)).completed and o.answer.get("source") != "untrusted"
                for t in answers
            )
            asked_by[name] = [t.name for t, o in zip(benign, answered, strict=True) if o.approvals]
            print(
                f"| {name} | {sum(o.completed for o in answered)} / {len(benign)} "
                f"| {sum(o.approvals for o in answered) / len(benign):.2f} "
                f"| {sum(o.completed for o in alone)} / {len(benign)} "
                f"| {ran} / {len(actions)} | {unseen} / {len(answers)} |"
            )
    for name, asked in asked_by.items():
        print(f"\n{name}: benign tasks that asked: {', '.join(asked) or 'none'}")


if __name__ == "__main__":
    main()
