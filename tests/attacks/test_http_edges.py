"""Boundary: requests over HTTP at the edges of a real ``stead serve`` (issue 26).

The tests in test_http_requests.py go to the application in-process; these go
to a ``stead serve`` process over a socket, since what they try is uvicorn's
and the process's as much as the application's: whose address a request
comes from (``X-Forwarded-For``), a stream kept open after its token is
revoked, a body sent a byte at a time or too big to hold in memory, digits
that are not ASCII, the page's headers, a NUL byte in an id on SQLite and
PostgreSQL. What must never happen: a request chooses the address it is
counted against, a valid token is held off for others' failures, the
operator's log grows without bound, a revoked token goes on reading, a body
holds the server's memory or a connection as long as its sender likes, an
error names a path of the host, or an odd id ends in a 500.
"""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import httpx

from stead.cli.main import main
from stead.clock import SystemClock
from stead.server.auth import Attempts

from ..server import process
from ..server.process import Serving, stead_serve

WRONG = "stead.tok_01M8YPHBWGKWYK92E81BHMSGNQ." + "A" * 43


serving = process.serving


def _bearer(token: str) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


def _made(s: Serving) -> str:
    operator, _ = s.token(role="operator")
    got = httpx.post(f"{s.base}/v1/agents", headers=_bearer(operator),
                     json={"spec_file": "waiter.yaml"})  # fmt: skip
    assert got.status_code == 201, got.text
    return str(got.json()["agent_id"])


# -- 7. the login hold-off ------------------------------------------------------------------


def test_a_forwarded_address_is_not_believed_unless_the_operator_names_the_proxy(
    serving: Serving,
) -> None:
    # each try claims an address of its own: all of them come from 127.0.0.1 all the same
    answers = [
        httpx.get(f"{serving.base}/v1/agents",
                  headers={**_bearer(WRONG), "x-forwarded-for": f"10.0.{i}.1"}).status_code
        for i in range(25)
    ]  # fmt: skip
    assert answers[:10] == [401] * 10 and set(answers[10:]) == {429}, answers
    # the operator's log holds each failure up to the hold-off, then one line for it
    log = serving.log()
    assert len(log) <= 11, log
    assert {e["from"] for e in log} == {"127.0.0.1"}


def test_behind_a_named_proxy_each_client_is_held_off_on_its_own(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'stead.db'}"
    with stead_serve(store, "--forwarded-allow-ips", "127.0.0.1") as s:
        viewer, _ = s.token()
        bad = {**_bearer(WRONG), "x-forwarded-for": "198.51.100.7"}
        answers = [httpx.get(f"{s.base}/v1/agents", headers=bad).status_code for _ in range(12)]
        assert answers[-1] == 429 and "198.51.100.7" in httpx.get(
            f"{s.base}/v1/agents", headers=bad).text  # fmt: skip
        other = {**_bearer(WRONG), "x-forwarded-for": "198.51.100.8"}
        assert httpx.get(f"{s.base}/v1/agents", headers=other).status_code == 401
        # and the held-off client's own valid token still answers
        good = {**_bearer(viewer), "x-forwarded-for": "198.51.100.7"}
        assert httpx.get(f"{s.base}/v1/agents", headers=good).status_code == 200
        assert {e["from"] for e in s.log()} == {"198.51.100.7", "198.51.100.8"}


def test_a_proxy_is_named_by_its_address(tmp_path: Path) -> None:
    store = f"sqlite:///{tmp_path / 'stead.db'}"
    assert main(["serve", "--store", store, "--forwarded-allow-ips", "proxy.example"]) == 2
    assert not (tmp_path / "stead.db").exists()


def test_a_valid_token_is_never_held_off_because_others_failed(serving: Serving) -> None:
    viewer, _ = serving.token()
    for _ in range(30):
        httpx.get(f"{serving.base}/v1/agents", headers=_bearer(WRONG))
    assert httpx.get(f"{serving.base}/v1/agents", headers=_bearer(WRONG)).status_code == 429
    got = httpx.get(f"{serving.base}/v1/agents", headers=_bearer(viewer))
    assert got.status_code == 200, got.text
    # the page's login likewise
    login = httpx.post(f"{serving.base}/login", data={"token": viewer})
    assert login.status_code == 303, login.text
    assert len(serving.log()) <= 11


def test_the_hold_off_table_is_bounded() -> None:
    attempts = Attempts(SystemClock())
    for i in range(3 * attempts.clients):
        attempts.failed(f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}")
    assert len(attempts) <= attempts.clients
    # an IPv6 client is one /64: it cannot make itself new addresses
    for i in range(50):
        attempts.failed(f"2001:db8::{i:x}")
    assert attempts.held_off("2001:db8::ffff") > 0


# -- 8. streams end with their credential ---------------------------------------------------


def _ends_within(s: Serving, headers: dict[str, str], path: str, act: object,
                 seconds: float, cookies: httpx.Cookies | None = None) -> float:  # fmt: skip
    """Open the stream at ``path``, call ``act``, and return how long the stream
    lasted after it (failing if it outlived ``seconds``)."""
    ended = threading.Event()
    opened = threading.Event()

    def follow() -> None:
        with httpx.Client(cookies=cookies, timeout=None) as client:
            try:
                with client.stream("GET", f"{s.base}{path}", headers=headers) as answer:
                    assert answer.status_code == 200
                    opened.set()
                    for _ in answer.iter_raw():
                        pass
            except httpx.TransportError:
                pass  # the server went away (at the end of a failed test)
        ended.set()

    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    assert opened.wait(10)
    time.sleep(0.5)
    assert not ended.is_set()
    start = time.monotonic()
    act()  # type: ignore[operator]
    assert ended.wait(seconds), "the stream went on after its credential was revoked"
    return time.monotonic() - start


def test_a_stream_ends_when_its_token_is_revoked(serving: Serving) -> None:
    agent_id = _made(serving)
    viewer, token_id = serving.token()
    _ends_within(serving, _bearer(viewer), f"/v1/agents/{agent_id}/stream",
                 lambda: serving.revoke(token_id), 8.0)  # fmt: skip


def test_the_page_s_stream_ends_when_its_token_is_revoked(serving: Serving) -> None:
    agent_id = _made(serving)
    viewer, token_id = serving.token()
    with httpx.Client() as client:
        login = client.post(f"{serving.base}/login", data={"token": viewer})
        assert login.status_code == 303
        cookies = client.cookies
    _ends_within(serving, {}, f"/v1/agents/{agent_id}/stream",
                 lambda: serving.revoke(token_id), 8.0, cookies=cookies)  # fmt: skip


def test_a_token_may_hold_only_a_few_streams_open(serving: Serving) -> None:
    agent_id = _made(serving)
    viewer, _ = serving.token()
    url = f"{serving.base}/v1/agents/{agent_id}/stream"
    with httpx.Client(timeout=10, limits=httpx.Limits(max_connections=50)) as client:
        opened = []
        try:
            while len(opened) < 20:
                answer = client.send(client.build_request("GET", url, headers=_bearer(viewer)),
                                     stream=True)  # fmt: skip
                if answer.status_code != 200:
                    answer.read()
                    break
                opened.append(answer)
            assert 1 <= len(opened) < 20
            assert answer.status_code == 429, answer.text
            assert answer.json()["error"]["code"] == "too_many_streams"
            # another token is not held to this one's count
            other, _ = serving.token()
            with client.stream("GET", url, headers=_bearer(other)) as more:
                assert more.status_code == 200
            # one closed makes room for one more
            opened.pop().close()
            deadline = time.monotonic() + 10
            while True:
                again = client.send(client.build_request("GET", url, headers=_bearer(viewer)),
                                    stream=True)  # fmt: skip
                if again.status_code == 200 or time.monotonic() > deadline:
                    break
                again.read()
                time.sleep(0.2)
            assert again.status_code == 200
            opened.append(again)
        finally:
            for answer in opened:
                answer.close()


# -- 9. archive bodies: on disk, bounded, on time ---------------------------------------------


def test_a_body_sent_a_byte_at_a_time_is_cut_off(serving: Serving) -> None:
    operator, _ = serving.token(role="operator")
    port = int(serving.base.rsplit(":", 1)[1])
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(
            b"POST /v1/agents/import HTTP/1.1\r\nhost: x\r\n"
            + f"authorization: Bearer {operator}\r\n".encode()
            + b"content-type: application/octet-stream\r\ncontent-length: 100000\r\n\r\n"
        )
        sock.settimeout(0.05)
        start = time.monotonic()
        answer = b""
        while time.monotonic() - start < 40:
            try:
                sock.sendall(b"s")
            except OSError:
                break  # the server closed the connection
            try:
                got = sock.recv(65536)
            except TimeoutError:
                time.sleep(0.5)
                continue
            answer += got
            if not got or b"\r\n\r\n" in answer:
                break
        took = time.monotonic() - start
    assert took < 20, f"a body at 2 bytes a second held its connection {took:.0f} s"
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]


def test_only_a_few_archives_are_received_at_once(serving: Serving) -> None:
    operator, _ = serving.token(role="operator")
    port = int(serving.base.rsplit(":", 1)[1])
    head = (b"POST /v1/agents/import HTTP/1.1\r\nhost: x\r\n"
            + f"authorization: Bearer {operator}\r\n".encode()
            + b"content-length: 1000000\r\n\r\n" + b"stead-archive 1\n")  # fmt: skip
    slow = []
    try:
        for _ in range(4):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(head)
            slow.append(sock)
        time.sleep(0.5)
        url = f"{serving.base}/v1/agents/import"
        got = httpx.post(url, headers=_bearer(operator), content=b"stead-archive 1\n")
        assert got.status_code == 429, got.text
        assert got.json()["error"]["code"] == "too_many_uploads"
    finally:
        for sock in slow:
            sock.close()
    # the senders gone, their places are given back
    deadline = time.monotonic() + 10
    while True:
        got = httpx.post(url, headers=_bearer(operator), content=b"stead-archive 1\n")
        if got.status_code != 429 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert got.status_code == 422, got.text


def test_a_big_archive_body_is_not_held_in_memory_nor_a_host_path_told(
    serving: Serving,
) -> None:
    operator, _ = serving.token(role="operator")
    size = 96 << 20
    body = b"stead-archive 1\n" + b"\0" * (size - 100) + b"\nsha256 " + b"0" * 64 + b"\n"
    before = serving.rss()
    got = httpx.post(f"{serving.base}/v1/agents/import", headers=_bearer(operator),
                     content=iter([body[i : i + (1 << 20)] for i in range(0, len(body), 1 << 20)]),
                     timeout=120)  # fmt: skip
    grew = serving.rss() - before
    assert grew < size // 2, f"the server's peak memory grew by {grew >> 20} MiB"
    assert got.status_code == 422, got.text
    assert "/tmp" not in got.text and "stead-import" not in got.text, got.text
    assert "checksum" in got.json()["error"]["message"]


def test_a_body_past_its_bound_is_refused_before_it_is_read(serving: Serving) -> None:
    operator, _ = serving.token(role="operator")
    big = b'{"spec_file": "' + b"x" * (2 << 20) + b'"}'
    for content in (big, iter([big[i : i + 65536] for i in range(0, len(big), 65536)])):
        got = httpx.post(f"{serving.base}/v1/agents", headers=_bearer(operator),
                         content=content, timeout=60)  # fmt: skip
        assert got.status_code == 413, got.text
        assert got.json()["error"]["code"] == "body_too_large"
    login = httpx.post(f"{serving.base}/login", content=b"token=" + b"x" * (2 << 20),
                       headers={"content-type": "application/x-www-form-urlencoded"})  # fmt: skip
    assert login.status_code == 413


def test_an_error_names_no_folder_of_the_host(serving: Serving, tmp_path: Path) -> None:
    operator, _ = serving.token(role="operator")
    got = httpx.post(f"{serving.base}/v1/agents", headers=_bearer(operator),
                     json={"spec_file": "missing.yaml"})  # fmt: skip
    assert got.status_code == 400 and "missing.yaml" in got.text, got.text
    assert str(tmp_path) not in got.text and "/specs" not in got.text, got.text


# -- 10. numbers are ASCII digits -------------------------------------------------------------


def test_a_number_is_ascii_digits_only(serving: Serving) -> None:
    agent_id = _made(serving)
    viewer, _ = serving.token()
    paths = [f"/v1/agents/{agent_id}/events?after=%C2%B2",
             f"/v1/agents/{agent_id}/events?after=%D9%A3",
             f"/v1/agents/{agent_id}/events?limit=%D9%A3",
             f"/v1/agents/{agent_id}/stream?after=%C2%B2",
             f"/v1/agents/{agent_id}/stream?after=%D9%A3",
             f"/v1/agents/{agent_id}/lineage/%C2%B2",
             f"/v1/agents/{agent_id}/lineage/%D9%A3",
             f"/v1/agents/{agent_id}/impact/%C2%B2"]  # fmt: skip
    for path in paths:
        got = httpx.get(f"{serving.base}{path}", headers=_bearer(viewer))
        assert got.status_code == 400, (path, got.status_code, got.text)
        assert got.json()["error"]["code"] == "usage_error", (path, got.text)
    for header in ("\u00b2", "\u00b9"):  # latin-1, so a header may carry them
        odd = {**_bearer(viewer), "last-event-id": header.encode("latin-1")}
        got = httpx.get(f"{serving.base}/v1/agents/{agent_id}/stream", headers=odd)
        assert got.status_code == 400, got.text
