"""The web page for people: log in with a token, watch agents, answer approvals.

Pages are rendered on the server (Jinja2, escaping everything) and work with
plain HTML forms, so there is no JavaScript to build; the one script a page
has (an agent's timeline following its journal through the event stream) is
a few lines inline, and the page works without it.

Logging in exchanges a token for a session: a random id in an ``HttpOnly``,
``SameSite=Strict`` cookie, kept in this process for :data:`SESSION_SECONDS`
and checked against the token on every request, so revoking the token ends
the session too. Every form carries the session's CSRF token, compared in
constant time before anything is done. Failed logins count against the
address like failed API calls (:class:`~stead.server.auth.Attempts`), and a
valid token logs in even from an address held off. Each page is sent with a
``Content-Security-Policy`` that runs only its own inline script and style (by
a nonce made for that answer), talks only to this server and lets no site
frame it; what an agent wrote is shown with its control characters escaped
(:func:`~stead.summaries.shown`).
"""

from __future__ import annotations

import contextlib
import hmac
import json
import secrets
import threading
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, quote

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from ..clock import iso
from ..errors import NotFound, SteadError, UsageError
from ..integrity.certificates import journaled_certificate
from ..integrity.clearing import cleared
from ..integrity.inbox import explained, origin_text, plural, waited_text
from ..journal import Kind
from ..memories.person import Memories
from ..notify import hooks
from ..schedules import Schedules
from ..snapshots import retention
from ..store.shown import QUEUED, QUEUED_REASON, shown_status
from ..store.tokens import TokenRecord
from ..summaries import shown
from ..upgrades.apply import digest_at, history, spec_events
from . import auth, bodies
from .app import Refused, Server, check_token
from .errors import status_of
from .schemas import odd_path_part
from .timeline import describe

SESSION_SECONDS = 8 * 3600.0
KINDS = sorted(k.value for k in Kind)
"""Every event kind, for the timeline's stream (one listener each)."""
COOKIE = "stead_web"
VALIDITY = {"15 minutes": 900, "1 hour": 3600, "1 day": 86400}
_TEMPLATES = Environment(
    loader=FileSystemLoader(Path(__file__).parent / "templates"),
    autoescape=select_autoescape(["html"]),
)
_TEMPLATES.filters["iso"] = iso
_TEMPLATES.filters["shown"] = lambda text: shown(str(text))  # an agent's words, escapes visible
_TEMPLATES.filters["plural"] = lambda n, word: plural(int(n), word)
_TEMPLATES.filters["origin"] = lambda o: shown(origin_text(o))
_TEMPLATES.filters["waited"] = waited_text
# a value as JSON a person reads (autoescaped after, as any str): "<" stays "<", not \u003c
_TEMPLATES.filters["pretty"] = lambda v: shown(json.dumps(v, indent=2, ensure_ascii=False))


@dataclass(frozen=True, slots=True)
class Session:
    token_id: str
    csrf: str
    expires: float


class Sessions:
    """Sessions of this server process (a restart asks people to log in again)."""

    def __init__(self, server: Server) -> None:
        self._server = server
        self._lock = threading.Lock()
        self._open: dict[str, Session] = {}

    def open(self, token: TokenRecord) -> str:
        sid = secrets.token_urlsafe(32)
        with self._lock:
            now = self._server.clock.now()
            self._open = {k: s for k, s in self._open.items() if s.expires > now}
            self._open[sid] = Session(token.token_id, secrets.token_urlsafe(24),
                                      now + SESSION_SECONDS)  # fmt: skip
        return sid

    def close(self, sid: str) -> None:
        with self._lock:
            self._open.pop(sid, None)

    def find(self, sid: str) -> tuple[Session, TokenRecord] | None:
        with self._lock:
            found = self._open.get(sid)
        if found is None or found.expires <= self._server.clock.now():
            return None
        token = self._server.tokens.get_token(found.token_id)
        if token is None or token.revoked_at is not None:
            self.close(sid)
            return None
        return found, token


def _local(path: str | None) -> str:
    """``path`` if it is a page of this server, else ``/``: a login never sends a
    person on to another site (``//host``, ``https:…``, a backslash)."""
    if not path or not path.startswith("/") or path.startswith("//") or "\\" in path:
        return "/"
    return path


def _page(name: str, code: int = 200, **values: Any) -> HTMLResponse:
    """The page ``name``, under a policy that runs only its own inline script and
    style (by a nonce made for this answer) and talks only to this server."""
    nonce = secrets.token_urlsafe(16)
    policy = (
        f"default-src 'none'; script-src 'nonce-{nonce}'; style-src 'nonce-{nonce}'; "
        "img-src 'self'; connect-src 'self'; form-action 'self'; base-uri 'none'; "
        "frame-ancestors 'none'"
    )
    return HTMLResponse(
        _TEMPLATES.get_template(name).render(nonce=nonce, **values),
        status_code=code,
        headers={"content-security-policy": policy},
    )


async def _form(request: Request) -> dict[str, str] | Response:
    """The page's form, read with the bound and deadline of every body."""
    got = await bodies.read(request, bodies.MAX_BODY)
    if isinstance(got, Response):
        return got
    return dict(parse_qsl(bytes(got.data).decode("utf-8", "replace"), max_num_fields=100))


def routes(server: Server) -> list[Route]:
    sessions = Sessions(server)
    server.sessions = sessions

    async def login_form(request: Request) -> Response:
        return _page("login.html", error=None, next=_local(request.query_params.get("next")))

    async def login(request: Request) -> Response:
        form = await _form(request)
        if isinstance(form, Response):
            return form
        presented = form.get("token", "").strip()
        found = await check_token(server, request, presented, "/login")
        if isinstance(found, Refused):
            if found.wait > 0:
                return _page("login.html", 429, error="Too many failed attempts; wait a minute.",
                             next=_local(form.get("next")))  # fmt: skip
            return _page("login.html", 401, error="That token is not valid.",
                         next=_local(form.get("next")))  # fmt: skip
        answer = RedirectResponse(_local(form.get("next", "")), status_code=303)
        answer.set_cookie(COOKIE, sessions.open(found), max_age=int(SESSION_SECONDS),
                          httponly=True, samesite="strict", secure=request.url.scheme == "https",
                          path="/")  # fmt: skip
        return answer

    def page(
        handler: Callable[[Request, Session, TokenRecord], Any],
        post: bool = False,
        needs: tuple[str, str] | None = None,
    ) -> Callable[[Request], Any]:
        """``handler`` behind the session (and, for a form, its CSRF token); ``needs``
        is the action (:data:`auth.ACTIONS`) a form takes and what it does, in words,
        for the refusal a lesser role gets."""

        async def handle(request: Request) -> Response:
            found = sessions.find(request.cookies.get(COOKIE, ""))
            if found is None:
                back = request.url.path if request.method == "GET" else "/"
                return RedirectResponse(f"/login?next={quote(back)}", status_code=303)
            session, token = found
            odd = odd_path_part(request.path_params)
            if odd is not None:
                return _page("error.html", 400, message=odd, token=token, session=session)
            if post:
                form = await _form(request)
                if isinstance(form, Response):
                    return form
                if not hmac.compare_digest(form.get("csrf", ""), session.csrf):
                    return _page("error.html", 403, message="This form has expired; reload.")
                request.state.form = form
            if needs is not None and not auth.allows(token.role, needs[0]):
                return _page("error.html", 403, message=f"A {token.role} cannot {needs[1]}.",
                             token=token, session=session)  # fmt: skip
            try:
                answer: Response = await run_in_threadpool(handler, request, session, token)
            except SteadError as exc:
                return _page("error.html", status_of(exc), message=server.unplaced(str(exc)),
                             token=token,
                             session=session)  # fmt: skip
            if post:
                server.nudge()
            return answer

        return handle

    def agents(request: Request, session: Session, token: TokenRecord) -> Response:
        rt = server.runtime(token)
        wanted = request.query_params.get("status") or None
        now = rt.clock.now()
        shown = [
            replace(a, status=shown_status(rt.store, a.agent_id, a.status, now))
            for a in rt.store.list_agents(token.tenant)
        ]
        listed = [a for a in shown if wanted in (None, a.status)]
        pending = rt.pending_approvals(token.tenant)
        return _page("agents.html", token=token, session=session, agents=listed,
                     status=wanted, pending=len(pending),
                     deleted=request.query_params.get("deleted"),
                     collected=request.query_params.get("collected"),
                     can_collect=auth.allows(token.role, "govern"))  # fmt: skip

    def collect(request: Request, session: Session, token: TokenRecord) -> Response:
        text = str(request.state.form.get("days", "")).strip()
        if not text.isdigit() or len(text) > 5:
            raise UsageError("the retention is a whole number of days (0 to 36500)")
        dry = request.state.form.get("dry_run") == "on"
        done = retention.gc(server.runtime(token), int(text) * 86400.0, dry_run=dry,
                            tenant=token.tenant)  # fmt: skip
        said = (f"{'Would delete' if dry else 'Deleted'} {len(done['agents'])} finished "
                f"agent(s) and {done['blobs']} unused blob(s).")  # fmt: skip
        return RedirectResponse(f"/?collected={quote(said)}", status_code=303)

    def agent(request: Request, session: Session, token: TokenRecord) -> Response:
        rt = server.runtime(token)
        agent_id = request.path_params["agent_id"]
        record = rt.store.get_record(agent_id)
        state = rt.store.load_state(agent_id)
        events = [describe(e) for e in rt.store.read_events(agent_id)]
        mine = [a for _, a in explained(rt, rt.pending_approvals(token.tenant, agent_id))]
        scope = rt.scope(agent_id)
        certificate = None
        if state.status == "completed":
            with contextlib.suppress(SteadError):
                certificate = journaled_certificate(rt.store, agent_id)
        status = shown_status(rt.store, agent_id, state.status, rt.clock.now())
        return _page("agent.html", token=token, session=session, record=record, state=state,
                     status=status, status_reason=QUEUED_REASON if status == QUEUED
                     else state.status_reason,
                     events=events, approvals=mine, validity=VALIDITY, kinds=KINDS,
                     scope=scope, snapshots=rt.store.list_snapshots(agent_id),
                     certificate=certificate, can_answer=auth.allows(token.role, "approve"),
                     can_cancel=auth.allows(token.role, "operate") and not state.is_final,
                     can_delete=auth.allows(token.role, "govern"),
                     versions=history(rt.store, agent_id),
                     memories=[m.to_json() for m in Memories(rt).list(agent_id)],
                     can_forget=auth.allows(token.role, "operate"),
                     now=rt.clock.now())  # fmt: skip

    def event(request: Request, session: Session, token: TokenRecord) -> Response:
        rt = server.runtime(token)
        agent_id = request.path_params["agent_id"]
        seq = int(request.path_params["seq"])
        found = list(rt.store.read_events(agent_id, seq, seq))
        if not found:
            raise NotFound(f"agent {agent_id} has no event {seq}")
        graph = rt.provenance(agent_id)
        return _page("event.html", token=token, session=session, agent_id=agent_id,
                     event=found[0], line=describe(found[0]),
                     spec_version=digest_at(spec_events(rt.store, agent_id), seq),
                     lineage=graph.lineage(seq), impact=graph.impact(seq))  # fmt: skip

    def cancel(request: Request, session: Session, token: TokenRecord) -> Response:
        agent_id = request.path_params["agent_id"]
        server.runtime(token).cancel(agent_id, str(request.state.form.get("reason", "")))
        return RedirectResponse(f"/agents/{agent_id}", status_code=303)

    def delete(request: Request, session: Session, token: TokenRecord) -> Response:
        agent_id = request.path_params["agent_id"]
        if request.state.form.get("confirm", "") != agent_id:
            raise UsageError("to delete the agent, type its id to confirm")
        done = retention.delete(server.runtime(token), agent_id)
        return RedirectResponse(f"/?deleted={quote(done['agent_id'])}", status_code=303)

    def clear(request: Request, session: Session, token: TokenRecord) -> Response:
        rt = server.runtime(token)
        agent_id, violation_id = request.path_params["agent_id"], request.path_params["vid"]
        reason = str(request.state.form.get("reason", "")).strip()
        if not reason:
            raise UsageError("clearing a violation needs a reason")
        rt.append_as_person(agent_id, lambda s: cleared(s, violation_id, rt.person(), reason))
        return RedirectResponse(f"/agents/{agent_id}", status_code=303)

    def inbox(request: Request, session: Session, token: TokenRecord) -> Response:
        rt = server.runtime(token)
        pending = explained(rt, rt.pending_approvals(token.tenant))
        return _page("approvals.html", token=token, session=session, pending=pending,
                     validity=VALIDITY, done=request.query_params.get("done"),
                     verdict=request.query_params.get("as"),
                     can_answer=auth.allows(token.role, "approve"))  # fmt: skip

    def answer(request: Request, session: Session, token: TokenRecord) -> Response:
        rt = server.runtime(token)
        approval_id = request.path_params["approval_id"]
        form = request.state.form
        verdict = request.path_params["verdict"]
        if verdict not in ("approve", "deny"):
            return _page("error.html", 404, message="There is no such answer.", token=token,
                         session=session)  # fmt: skip
        if verdict == "approve":
            seconds = VALIDITY.get(str(form.get("valid_for", "")), 0)
            if not seconds:
                raise UsageError("choose how long the approval holds")
            rt.approve(approval_id, float(seconds))
        else:
            rt.deny(approval_id, str(form.get("reason", "")))
        return RedirectResponse(f"/approvals?done={quote(approval_id)}&as={verdict}",
                                status_code=303)  # fmt: skip

    def webhooks(request: Request, session: Session, token: TokenRecord) -> Response:
        listed = hooks.listing(hooks.rows_of(server.store), token.tenant)
        return _page("webhooks.html", token=token, session=session, webhooks=listed)

    def schedules(request: Request, session: Session, token: TokenRecord) -> Response:
        book = Schedules(server.runtime(token))
        listed = [book.view(r).to_json() for r in book.list()]
        return _page("schedules.html", token=token, session=session, schedules=listed,
                     can_change=auth.allows(token.role, "operate"))  # fmt: skip

    def schedule_change(request: Request, session: Session, token: TokenRecord) -> Response:
        book = Schedules(server.runtime(token))
        found = book.get(request.path_params["schedule_id"])
        if request.path_params["change"] == "pause":
            book.pause(found.schedule_id)
        elif request.path_params["change"] == "resume":
            book.resume(found.schedule_id)
        else:
            return _page("error.html", 404, message="There is no such change.", token=token,
                         session=session)  # fmt: skip
        return RedirectResponse("/schedules", status_code=303)

    def forget(request: Request, session: Session, token: TokenRecord) -> Response:
        agent_id, memory_id = request.path_params["agent_id"], request.path_params["memory_id"]
        Memories(server.runtime(token)).forget(agent_id, memory_id)
        return RedirectResponse(f"/agents/{quote(agent_id)}#memories", status_code=303)

    def logout(request: Request, session: Session, token: TokenRecord) -> Response:
        sessions.close(request.cookies.get(COOKIE, ""))
        gone = RedirectResponse("/login", status_code=303)
        gone.delete_cookie(COOKIE, path="/")
        return gone

    return [
        Route("/login", login_form, methods=["GET"]),
        Route("/login", login, methods=["POST"]),
        Route("/", page(agents), methods=["GET"]),
        Route("/agents/{agent_id}", page(agent), methods=["GET"]),
        Route("/agents/{agent_id}/events/{seq:int}", page(event), methods=["GET"]),
        Route("/gc", page(collect, post=True, needs=("govern", "delete agents")), methods=["POST"]),
        Route(
            "/agents/{agent_id}/cancel",
            page(cancel, post=True, needs=("operate", "cancel agents")),
            methods=["POST"],
        ),
        Route(
            "/agents/{agent_id}/delete",
            page(delete, post=True, needs=("govern", "delete agents")),
            methods=["POST"],
        ),
        Route(
            "/agents/{agent_id}/violations/{vid}/clear",
            page(clear, post=True, needs=("approve", "clear violations")),
            methods=["POST"],
        ),
        Route("/approvals", page(inbox), methods=["GET"]),
        Route(
            "/approvals/{approval_id}/{verdict:str}",
            page(answer, post=True, needs=("approve", "answer approvals")),
            methods=["POST"],
        ),
        Route("/webhooks", page(webhooks), methods=["GET"]),
        Route("/schedules", page(schedules), methods=["GET"]),
        Route(
            "/schedules/{schedule_id}/{change:str}",
            page(schedule_change, post=True, needs=("operate", "pause or resume schedules")),
            methods=["POST"],
        ),
        Route(
            "/agents/{agent_id}/memories/{memory_id}/forget",
            page(forget, post=True, needs=("operate", "forget memories")),
            methods=["POST"],
        ),
        Route("/logout", page(logout, post=True), methods=["POST"]),
    ]
