"""Running a tutorial page as a reader would: its files written, its commands run.

A tutorial is Markdown. What the reader is told to create is a fenced block with a
file name (```` ```yaml title="agent.yaml" ````): it is written, relative to the
tutorial's folder. What the reader is told to type is a ```` ```console ```` block:
each line starting with ``$ `` is a command (a line ending in ``\\`` goes on to the
next), every other line is what the reader will see, shown for them and not compared.

The commands run one after another in the tutorial's folder, each in bash with the
environment and working folder the previous one left (so ``export`` and ``cd`` carry
on, as in the reader's terminal). A command must exit 0; an HTML comment just before
a block, invisible on the page, says otherwise for the block's last command and what
its output must hold::

    <!-- expect: exit=3 contains="waiting" -->

A command ending in ``&`` keeps running in the background, as the reader's would, and
is killed with everything it started when the tutorial ends.

The test that runs a page may replace text in its files and commands (a provider's
address with our fake server's), and says which in one place, beside the test.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_FENCE = re.compile(r"^(?P<indent> *)(?P<fence>```+)(?P<info>.*)$")
_TITLE = re.compile(r'title="(?P<title>[^"]+)"')
_EXPECT = re.compile(r"^<!--\s*expect:(?P<body>.*?)-->\s*$")


@dataclass
class Block:
    """One fenced block a test acts on: a file to write or commands to run."""

    line: int
    language: str
    text: str
    title: str | None = None
    exit: int = 0
    contains: list[str] = field(default_factory=list)

    def commands(self) -> list[str]:
        out: list[str] = []
        pending: list[str] = []
        for raw in self.text.splitlines():
            if pending:
                pending.append(raw)
            elif raw.startswith("$ "):
                pending = [raw[2:]]
            else:
                continue
            if not raw.endswith("\\"):
                out.append("\n".join(pending))
                pending = []
        if pending:
            out.append("\n".join(pending))
        return out


def read_blocks(page: Path) -> list[Block]:
    """The page's file blocks and console blocks, in order."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks: list[Block] = []
    expect: tuple[int, list[str]] | None = None
    i = 0
    while i < len(lines):
        m = _EXPECT.match(lines[i].strip())
        if m:
            expect = _parse_expect(m["body"], page, i + 1)
            i += 1
            continue
        fence = _FENCE.match(lines[i])
        if not fence:
            if lines[i].strip():
                expect = None  # an expectation belongs to the block right after it
            i += 1
            continue
        start, indent, marker = i, len(fence["indent"]), fence["fence"]
        info = fence["info"].strip()
        body: list[str] = []
        i += 1
        while i < len(lines) and lines[i].strip() != marker:
            body.append(lines[i][indent:])
            i += 1
        i += 1
        language = info.split()[0] if info else ""
        title = _TITLE.search(info)
        name = title["title"] if title else None
        block = Block(start + 1, language, "\n".join(body) + "\n", name)
        if expect is not None:
            block.exit, block.contains = expect
            expect = None
        if block.title or block.language == "console":
            blocks.append(block)
    return blocks


def _parse_expect(body: str, page: Path, line: int) -> tuple[int, list[str]]:
    code, contains = 0, []
    for word in shlex.split(body):
        key, _, value = word.partition("=")
        if key == "exit":
            code = int(value)
        elif key == "contains":
            contains.append(value)
        else:
            raise ValueError(f"{page}:{line}: unknown expectation {word!r}")
    return code, contains


@dataclass
class Ran:
    command: str
    code: int
    output: str


class Reader:
    """A reader's terminal in ``folder``: runs a page's blocks one after another."""

    def __init__(
        self, folder: Path, env: Mapping[str, str], replace: Mapping[str, str] | None = None
    ) -> None:
        self.folder = folder
        self.replace = dict(replace or {})
        self.ran: list[Ran] = []
        self._state = folder / ".tutorial-env"
        self._cwd = folder / ".tutorial-cwd"
        self._groups: list[int] = []
        base = dict(env)
        # the reader's `stead` is the one this test suite runs
        base["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{base.get('PATH', '')}"
        self._env = base
        self._cwd.write_text(str(folder), encoding="utf-8")
        self._state.write_text("", encoding="utf-8")

    def _swap(self, text: str) -> str:
        for old, new in self.replace.items():
            text = text.replace(old, new)
        return text

    def follow(self, page: Path, timeout: float = 300.0) -> list[Ran]:
        """Every block of the page, in order; an AssertionError names the first that fails."""
        for block in read_blocks(page):
            if block.title:
                target = Path(self._cwd.read_text(encoding="utf-8").strip()) / block.title
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(self._swap(block.text), encoding="utf-8")
                continue
            commands = block.commands()
            assert commands, f"{page}:{block.line}: a console block with no `$ ` command"
            for n, command in enumerate(commands):
                last = n == len(commands) - 1
                ran = self.run(command, timeout)
                want = block.exit if last else 0
                where = f"{page.name}:{block.line}: `{command}`"
                assert ran.code == want, (
                    f"{where} exited {ran.code}, the page expects {want}:\n{ran.output[-4000:]}"
                )
                if last:
                    for text in block.contains:
                        assert text in ran.output, (
                            f"{where}: its output lacks {text!r}:\n{ran.output[-4000:]}"
                        )
        return self.ran

    def run(self, command: str, timeout: float = 300.0) -> Ran:
        """One command in bash, in the state the previous one left."""
        script = (
            f"source {shlex.quote(str(self._state))}\n"
            f'cd "$(cat {shlex.quote(str(self._cwd))})"\n'
            f"{self._swap(command)}\n"
            "__rc=$?\n"
            f"export -p > {shlex.quote(str(self._state))}\n"
            f"pwd > {shlex.quote(str(self._cwd))}\n"
            "exit $__rc\n"
        )
        # a file, not a pipe: a server left running in the background holds it open
        log = self.folder / f".tutorial-out-{len(self.ran)}"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                ["bash", "-c", script],
                env=self._env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # what it leaves running is killed with its group
            )
        self._groups.append(proc.pid)
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self._kill(proc.pid)
            proc.wait()
            text = log.read_text("utf-8", "replace")
            raise AssertionError(f"`{command}` ran past {timeout} s:\n{text[-4000:]}") from None
        ran = Ran(command, proc.returncode, log.read_text("utf-8", "replace"))
        self.ran.append(ran)
        return ran

    def _kill(self, group: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)

    def close(self) -> None:
        """Stop what the page left running (a server started with ``&``)."""
        for group in reversed(self._groups):
            self._kill(group)


TUTORIALS = Path(__file__).parents[2] / "docs" / "tutorials"
HOW_TO = Path(__file__).parents[2] / "docs" / "how-to"
LOCAL_MODEL = "http://127.0.0.1:11434/v1"
"""Where the tutorials' local model server is; the tests' fake one stands in for it."""


def reader_env(tmp_path: Path) -> dict[str, str]:
    """A reader's environment: their PATH and locale, none of the suite's STEAD_ settings."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
    env["HOME"] = str(tmp_path / "home")
    (tmp_path / "home").mkdir()
    return env


def tool_results(body: Mapping[str, Any]) -> int:
    """How many tool results a chat-completions request carries (the step it is at)."""
    return sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
