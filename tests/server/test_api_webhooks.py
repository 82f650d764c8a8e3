"""The webhook endpoints: roles, tenants, the secret once, and the page's list."""

from __future__ import annotations

import json

from stead.store.webhook_rows import WebhookRows

from .conftest import Served

URL = "https://hooks.example.com/stead"


def test_an_admin_adds_and_removes_a_viewer_lists_another_tenant_sees_nothing(
    served: Served,
) -> None:
    for role in ("viewer", "operator", "approver"):
        refused = served.call("POST", "/v1/webhooks", role=role, json={"url": URL})
        assert refused.status_code == 403, role
    made = served.call("POST", "/v1/webhooks", json={"url": URL, "events": ["failed"]})
    assert made.status_code == 201
    added = made.json()
    assert added["secret"].startswith("whsec_") and added["events"] == ["failed"]
    rows = served.server.store
    assert isinstance(rows, WebhookRows)
    stored = rows.get_webhook(added["hook_id"])
    assert stored is not None and stored.secret.startswith("sealed:")  # under the vault key
    assert added["secret"] not in stored.secret
    listed = served.call("GET", "/v1/webhooks", role="viewer").json()
    assert [h["hook_id"] for h in listed] == [added["hook_id"]]
    assert added["secret"] not in json.dumps(listed) and listed[0]["secret_sealed"] is True
    history = served.call("GET", f"/v1/webhooks/{added['hook_id']}/deliveries", role="viewer")
    assert history.status_code == 200 and history.json()["deliveries"] == []

    assert served.call("GET", "/v1/webhooks", tenant="globex").json() == []
    for method, path in (("GET", f"/v1/webhooks/{added['hook_id']}/deliveries"),
                         ("DELETE", f"/v1/webhooks/{added['hook_id']}")):  # fmt: skip
        other = served.call(method, path, tenant="globex")
        assert other.status_code == 404 and "no webhook" in other.json()["error"]["message"], path
    assert served.call("DELETE", f"/v1/webhooks/{added['hook_id']}", role="approver"
                       ).status_code == 403  # fmt: skip
    assert served.call("DELETE", f"/v1/webhooks/{added['hook_id']}").status_code == 204
    assert served.call("GET", "/v1/webhooks", role="viewer").json() == []


def test_bad_webhooks_are_refused_with_what_to_do(served: Served) -> None:
    for body, words in (
        ({"url": "http://127.0.0.1:9/x"}, "would be refused"),
        ({"url": "https://169.254.169.254/latest"}, "would be refused"),
        ({"url": "ftp://example.com/x"}, "https://"),
        ({"url": URL, "events": ["everything"]}, "events/0"),
        ({"url": URL, "secret": "mine"}, "Additional properties"),
    ):
        got = served.call("POST", "/v1/webhooks", json=body)
        assert got.status_code == 400, body
        assert words in got.json()["error"]["message"], (body, got.json())


def test_the_page_lists_the_tenants_webhooks(served: Served) -> None:
    added = served.call("POST", "/v1/webhooks", json={"url": URL}).json()
    served.call("POST", "/v1/webhooks", tenant="globex", json={"url": URL + "/globex"})
    login = served.client.post("/login", data={"token": served.tokens[("acme", "viewer")]},
                               follow_redirects=False)  # fmt: skip
    assert login.status_code == 303
    page = served.client.get("/webhooks")
    assert page.status_code == 200
    assert added["hook_id"] in page.text and "nothing sent yet" in page.text
    assert "/globex" not in page.text and added["secret"] not in page.text
