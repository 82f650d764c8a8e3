"""A local S3-compatible server for the tests: moto's ``moto_server``, a real process.

One server per test session (the ``s3_endpoint`` fixture in tests/conftest.py)
listens on 127.0.0.1 at a free port, so the S3 blob store is tested through
real HTTP, signatures and all; each test makes a bucket of its own
(:func:`fresh_bucket`), emptied and removed afterwards. Where moto is not
installed or its server does not start, a test skips saying so, and fails in
CI (``tests.needs``).
"""

from __future__ import annotations

import functools
import importlib.util
import secrets
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import pytest

from .needs import missing

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

START_SECONDS = 30.0
CREDENTIALS = {
    # moto accepts any; these keep a developer's own AWS files out of the tests
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": "/nonexistent/stead-tests/aws-config",
    "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/stead-tests/aws-credentials",
    "AWS_EC2_METADATA_DISABLED": "true",
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _answers(endpoint: str) -> bool:
    try:
        with urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


@contextmanager
def moto_server() -> Iterator[str]:
    """Start ``moto_server`` on 127.0.0.1 and give its endpoint URL; stop it afterwards."""
    if importlib.util.find_spec("moto") is None:
        missing("moto is not installed (pip install -e '.[dev]')", "install moto[server]")
    with tempfile.TemporaryFile() as log, pytest.MonkeyPatch.context() as env:
        for name, value in CREDENTIALS.items():
            env.setenv(name, value)
        port = _free_port()
        endpoint = f"http://127.0.0.1:{port}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + START_SECONDS
            while not _answers(endpoint):
                if proc.poll() is not None or time.monotonic() > deadline:
                    log.seek(0)
                    tail = log.read()[-2000:].decode(errors="replace")
                    missing(f"moto_server did not start on {endpoint}: {tail}", "run moto_server")
                time.sleep(0.1)
            yield endpoint
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@functools.cache
def client(endpoint: str) -> S3Client:
    """The tests' own client, to make buckets and go behind a blob store's back (one per
    endpoint: making a client reads botocore's service model, a tenth of a second)."""
    import boto3

    return boto3.session.Session().client("s3", endpoint_url=endpoint, region_name="us-east-1")


@contextmanager
def fresh_bucket(endpoint: str) -> Iterator[str]:
    """The name of a new, empty bucket; emptied and removed afterwards."""
    s3 = client(endpoint)
    name = f"stead-test-{secrets.token_hex(6)}"
    s3.create_bucket(Bucket=name)
    try:
        yield name
    finally:
        listed = s3.list_objects_v2(Bucket=name).get("Contents", [])
        for item in listed:
            s3.delete_object(Bucket=name, Key=item["Key"])
        s3.delete_bucket(Bucket=name)


def url_for(bucket: str, endpoint: str, prefix: str = "blobs") -> str:
    """The blob store URL of ``prefix`` in ``bucket`` on the test server."""
    return f"s3://{bucket}/{prefix}?endpoint_url={endpoint}"
