"""What isolation commands get on this machine, for ``stead doctor``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from . import select as choice
from .base import Isolation, Limits, Sandbox, Unsandboxed
from .select import OPT_IN
from .session import SandboxSession


def session_isolation(sandbox: Sandbox) -> Isolation:
    """What commands get here, found by running one in a session (for ``stead doctor``).

    Only a real start shows whether the loop can be sealed from its commands;
    where it cannot, the answer's notes say that every command runs one-shot.
    """
    with tempfile.TemporaryDirectory(prefix="stead-doctor-") as folder:
        session = SandboxSession(sandbox, Path(folder))
        try:
            session.run(["/bin/true"], Path(folder), env={}, limits=Limits(wall_seconds=10))
            return session.isolation()
        finally:
            session.close()


def report() -> tuple[Isolation | None, str]:
    """What isolation commands would get here, for ``stead doctor``.

    With a sandbox, one command is run in a session: only a real start shows
    whether its loop can be sealed from its commands (else each runs one-shot).
    """
    sandbox, why = choice.probe()
    if sandbox is not None:
        return session_isolation(sandbox), ""
    if os.environ.get(OPT_IN) == "1":
        return Unsandboxed().isolation(), why
    return None, why
