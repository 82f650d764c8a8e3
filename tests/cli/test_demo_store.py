"""``stead demo --store URL`` runs the crash-and-resume demo on that store: PostgreSQL
as well as the demo's own SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from stead.store.postgres import PostgresStore

from ..postgres import fresh_schema, url_for

REPO = Path(__file__).resolve().parents[2]


def test_the_demo_runs_on_postgresql(tmp_path: Path) -> None:
    with fresh_schema() as schema:
        url = url_for(schema)
        env = {k: v for k, v in os.environ.items() if not k.startswith("STEAD_")}
        env["PYTHONPATH"] = f"{REPO / 'src'}:{REPO}"
        got = subprocess.run(
            [sys.executable, "-m", "stead", "demo", "--dir", str(tmp_path / "demo"),
             "--store", url],
            env=env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        assert got.returncode == 0, got.stdout + got.stderr
        assert "status: completed" in got.stdout and "audit chain: verified" in got.stdout
        assert f"--store {url}" in got.stdout and "log in with the token" in got.stdout
        assert not (tmp_path / "demo" / "stead.db").exists()  # nothing on SQLite
        store = PostgresStore(url)
        try:
            (agent,) = store.list_agents()
            assert agent.status == "completed"
        finally:
            store.close()
