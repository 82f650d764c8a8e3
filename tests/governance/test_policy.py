"""Cedar policies: compiling, verdicts, failing closed, and versions per tenant."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stead import FakeClock, Runtime
from stead.errors import GovernanceError, PolicyError, UsageError
from stead.governance.policy import PERMIT_ALL, PolicyVerdict, compile_policy, settable_policy
from stead.store.memory import MemoryStore
from stead.store.scoped import TenantStore

NOW = 1_767_225_600.0  # 2026-01-01T00:00:00Z


def verdict(
    text: str,
    *,
    tool: str = "write_file",
    effect: str = "idempotent",
    args: dict[str, Any] | None = None,
    autonomy: str = "act_autonomously",
    now: float = NOW,
    grants: Sequence[str] = ("gr_1",),
    version: int = 7,
    tenant: str = "acme",
) -> PolicyVerdict:
    return compile_policy(text, version).evaluate(
        agent_id="ag_1",
        tenant=tenant,
        name="builder",
        tool=tool,
        effect=effect,
        args=args or {},
        autonomy=autonomy,
        now=now,
        grants=list(grants),
    )


@pytest.fixture
def rt(tmp_path: Path) -> Runtime:
    runtime = Runtime(MemoryStore(), tmp_path / "data", clock=FakeClock())
    runtime.person = lambda: "alice@test"  # type: ignore[method-assign]
    return runtime


# -- compiling -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "permit(",
        "permit(principal, action, resource)",  # no ';'
        "allow everything please;",
        "permit(principal, action, resource) when { context.now < };",
    ],
)
def test_text_that_does_not_parse_is_refused(text: str) -> None:
    with pytest.raises(PolicyError, match="does not parse as Cedar"):
        compile_policy(text)


@pytest.mark.parametrize("text", ["", "   \n", "// only a comment\n"])
def test_text_with_no_policies_is_refused(text: str) -> None:
    with pytest.raises(PolicyError, match="holds no policies"):
        compile_policy(text)


@pytest.mark.parametrize(
    "text",
    [
        'forbid(principal, action, resource == Tool::"deploy");',
        "@ask forbid(principal, action, resource);\nforbid(principal, action, resource);",
    ],
)
def test_text_with_no_permit_is_refused_since_it_would_deny_every_call(text: str) -> None:
    with pytest.raises(PolicyError, match="holds no permit, so it would deny every call"):
        settable_policy(text)
    # a version stored before this rule still loads, and denies what it denies
    assert not compile_policy(text).permits


def test_a_template_only_text_is_refused_as_such() -> None:
    with pytest.raises(PolicyError, match="only templates"):
        compile_policy("permit(principal == ?principal, action, resource);")


def test_a_policy_error_is_a_governance_error() -> None:
    # the CLI reports GovernanceError as a usage problem (exit 2)
    assert issubclass(PolicyError, GovernanceError)


def test_a_refused_text_is_not_stored(rt: Runtime) -> None:
    with pytest.raises(PolicyError):
        rt.set_policy("acme", "permit(")
    assert rt.store.get_policy("acme") is None
    assert rt.set_policy("acme", PERMIT_ALL) == 1
    for broken in ("forbid(principal", "", "// nothing\n"):
        with pytest.raises(PolicyError):
            rt.set_policy("acme", broken)
    record = rt.store.get_policy("acme")
    assert record is not None and (record.version, record.text) == (1, PERMIT_ALL)
    assert rt.store.get_policy("acme", 2) is None


# -- versions --------------------------------------------------------------------------


def test_each_set_adds_one_version_and_old_versions_stay_readable(rt: Runtime) -> None:
    texts = [
        PERMIT_ALL,
        'permit(principal, action, resource == Tool::"read_file");',
        'forbid(principal, action, resource == Tool::"shell");\n' + PERMIT_ALL,
    ]
    assert [rt.set_policy("acme", t) for t in texts] == [1, 2, 3]
    latest = rt.store.get_policy("acme")
    assert latest is not None and (latest.version, latest.text) == (3, texts[2])
    for version, text in enumerate(texts, start=1):
        record = rt.store.get_policy("acme", version)
        assert record is not None
        assert (record.tenant, record.version, record.text) == ("acme", version, text)
        assert record.set_by == "alice@test" and record.set_at == rt.clock.now()
    assert rt.store.get_policy("acme", 4) is None
    # another tenant counts its own versions
    assert rt.set_policy("globex", PERMIT_ALL) == 1
    assert rt.store.get_policy("acme").version == 3  # type: ignore[union-attr]


def test_another_tenant_s_policy_is_invisible_through_a_tenant_view() -> None:
    inner = MemoryStore()
    inner.put_policy("globex", "forbid(principal, action, resource);", "bob", 1.0)
    acme = TenantStore(inner, "acme")
    assert acme.get_policy("globex") is None
    assert acme.get_policy("globex", 1) is None
    assert acme.get_policy("acme") is None
    with pytest.raises(UsageError, match="cannot set the policy of tenant globex"):
        acme.put_policy("globex", PERMIT_ALL, "mallory", 2.0)
    assert inner.get_policy("globex").version == 1  # type: ignore[union-attr]
    assert acme.put_policy("acme", PERMIT_ALL, "alice", 3.0) == 1
    record = acme.get_policy("acme")
    assert record is not None and record.text == PERMIT_ALL


def test_a_tenant_runtime_cannot_set_another_tenant_s_policy(tmp_path: Path) -> None:
    inner = MemoryStore()
    rt = Runtime(inner, tmp_path / "data", clock=FakeClock(), tenant="acme")
    with pytest.raises(UsageError):
        rt.set_policy("globex", PERMIT_ALL)
    assert inner.get_policy("globex") is None
    assert rt.set_policy("acme", PERMIT_ALL) == 1
    assert rt.store.get_policy("globex") is None


# -- verdicts --------------------------------------------------------------------------


def test_permit_all_allows_and_names_the_policy() -> None:
    v = verdict(PERMIT_ALL)
    assert v == PolicyVerdict("allow", 7, ("policy0",))


def test_no_applicable_permit_denies() -> None:
    v = verdict('permit(principal, action, resource == Tool::"read_file");')
    assert (v.decision, v.version, v.reasons) == ("deny", 7, ("no permit applies",))
    assert verdict(
        'permit(principal, action, resource == Tool::"read_file");', tool="read_file"
    ).decision == ("allow")


def test_an_ask_annotated_permit_asks_and_reasons_use_id_annotations() -> None:
    text = """
    @id("everything")
    permit(principal, action, resource);

    @id("shell needs a person")
    @ask
    permit(principal, action, resource == Tool::"shell");
    """
    asked = verdict(text, tool="shell")
    assert asked.decision == "ask"
    assert set(asked.reasons) == {"everything", "shell needs a person"}
    assert verdict(text, tool="read_file") == PolicyVerdict("allow", 7, ("everything",))


def test_an_ask_annotation_with_a_value_asks_too() -> None:
    text = '@ask("deploys need a second pair of eyes")\npermit(principal, action, resource);'
    assert verdict(text).decision == "ask"


def test_a_forbid_on_an_argument_value_denies_only_that_value() -> None:
    text = """
    permit(principal, action, resource);
    @id("no /etc")
    forbid(principal, action, resource)
      when { context.args has path && context.args.path like "/etc/*" };
    """
    denied = verdict(text, args={"path": "/etc/passwd", "content": "x"})
    assert (denied.decision, denied.reasons) == ("deny", ("no /etc",))
    assert verdict(text, args={"path": "src/etc/x"}).decision == "allow"
    assert verdict(text, args={"content": "no path at all"}).decision == "allow"


def test_a_forbid_beats_an_ask() -> None:
    text = (
        "@ask\npermit(principal, action, resource);\n"
        'forbid(principal, action, resource == Tool::"shell");'
    )
    assert verdict(text, tool="shell").decision == "deny"
    assert verdict(text, tool="read_file").decision == "ask"


def test_a_when_on_the_time_allows_only_inside_it() -> None:
    text = f"permit(principal, action, resource) when {{ context.now < {int(NOW) + 60} }};"
    assert verdict(text, now=NOW + 59.9).decision == "allow"  # whole seconds: 59
    assert verdict(text, now=NOW + 60).decision == "deny"
    assert verdict(text, now=NOW + 3600).decision == "deny"


def test_a_when_on_the_autonomy_level() -> None:
    text = (
        "permit(principal, action, resource) when "
        '{ context.autonomy == "act_autonomously" || context.effect == "read_only" };'
    )
    assert verdict(text, autonomy="act_autonomously").decision == "allow"
    assert verdict(text, autonomy="act_with_approval").decision == "deny"
    assert verdict(text, autonomy="observe", effect="read_only").decision == "allow"


def test_a_when_on_being_in_scope_and_on_the_grants() -> None:
    text = "permit(principal, action, resource) when { context.in_scope };"
    assert verdict(text, grants=["gr_1"]).decision == "allow"
    assert verdict(text, grants=[]).decision == "deny"
    named = 'permit(principal, action, resource) when { context.grants.contains("gr_9") };'
    assert verdict(named, grants=["gr_1", "gr_9"]).decision == "allow"
    assert verdict(named, grants=["gr_1"]).decision == "deny"


def test_principal_and_resource_attributes_are_available() -> None:
    text = (
        "permit(principal, action, resource) when "
        '{ principal.tenant == "acme" && principal.name == "builder" '
        '&& resource.effect == "idempotent" };'
    )
    assert verdict(text).decision == "allow"
    assert verdict(text, tenant="globex").decision == "deny"
    assert verdict(text, effect="external").decision == "deny"
    agent = 'permit(principal == Agent::"ag_1", action == Action::"call", resource);'
    assert verdict(agent).decision == "allow"


def test_a_policy_that_errors_while_evaluating_denies() -> None:
    # 'n' is not always there: Cedar reports an error for the policy that reads it
    text = "permit(principal, action, resource) when { context.args.n > 5 };"
    missing = verdict(text, args={})
    assert missing.decision == "deny"
    assert any("policy evaluation failed" in r for r in missing.reasons)
    assert verdict(text, args={"n": 9}).decision == "allow"


def test_an_erroring_forbid_denies_even_though_cedar_would_allow() -> None:
    # Cedar skips a policy that errors, so on its own it would let this call through
    # on the permit; an error must never let a call through
    text = PERMIT_ALL + "forbid(principal, action, resource) when { context.args.n > 5 };"
    v = verdict(text, args={"n": "lots"})
    assert v.decision == "deny"
    assert any("policy evaluation failed" in r for r in v.reasons)
    assert verdict(text, args={"n": 2}).decision == "allow"
    assert verdict(text, args={"n": 6}).decision == "deny"


def test_fractional_numbers_are_given_as_decimals_and_do_not_crash() -> None:
    text = 'permit(principal, action, resource) when { context.args.ratio == decimal("0.25") };'
    assert verdict(text, args={"ratio": 0.25}).decision == "allow"
    whole = "permit(principal, action, resource) when { context.args.size == 3 };"
    assert verdict(whole, args={"size": 3.0}).decision == "allow"  # a whole float is a number
    nested = {"opts": {"scale": [1.5, 2.0, None]}, "flag": True}
    assert verdict(PERMIT_ALL, args=nested).decision == "allow"


@settings(max_examples=100, deadline=None)
@given(
    args=st.dictionaries(
        st.text(min_size=1, max_size=8),
        st.recursive(
            st.none()
            | st.booleans()
            | st.floats()
            | st.sampled_from([float("nan"), float("inf"), float("-inf"), -0.0])
            | st.integers()
            | st.text(max_size=10),
            lambda inner: (
                st.lists(inner, max_size=3)
                | st.dictionaries(st.text(max_size=5), inner, max_size=3)
            ),
            max_leaves=8,
        ),
        max_size=4,
    )
)
def test_permit_all_allows_any_json_arguments(args: dict[str, Any]) -> None:
    assert verdict(PERMIT_ALL, args=args).decision == "allow"


@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, 1e20])
def test_permit_all_allows_a_whole_number_beyond_64_bits(value: float) -> None:
    assert verdict(PERMIT_ALL, args={"n": value}).decision == "allow"


# -- numbers a policy can compare ---------------------------------------------------------

AMOUNT_CAP = """
permit(principal, action, resource);
forbid(principal, action, resource)
when { context.decimals has amount && context.decimals.amount.greaterThan(decimal("2000.0")) };
"""


@pytest.mark.parametrize(
    ("amount", "decision"),
    [
        (98.70, "allow"),
        (2000.5, "deny"),
        (2500, "deny"),
        (1999, "allow"),
        (0.30000000000000004, "allow"),
    ],
)
def test_a_fractional_amount_is_compared_as_a_decimal_not_refused_as_text(
    amount: float, decision: str
) -> None:
    found = verdict(AMOUNT_CAP, tool="pay", args={"amount": amount, "to": "DE89"})
    assert found.decision == decision, found.reasons


def test_a_fraction_in_args_is_a_decimal_and_a_whole_number_a_long() -> None:
    policy = """
    permit(principal, action, resource)
    when { context.args.fee.lessThan(decimal("1.5")) && context.args.count < 3 };
    """
    assert verdict(policy, args={"fee": 0.25, "count": 2}).decision == "allow"
    assert verdict(policy, args={"fee": 2.75, "count": 2}).decision == "deny"
