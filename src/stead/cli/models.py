"""``stead model set``: give an agent another model, from its next decision on."""

from __future__ import annotations

import argparse

from .common import emit_json, err, runtime_for, wants_json


def register(
    sub: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> None:
    p = sub.add_parser("model", help="an agent's model")
    verbs = p.add_subparsers(dest="verb", required=True)
    s = verbs.add_parser(
        "set",
        parents=[common],
        help="swap an agent's model (live, waiting or hibernated); journaled",
    )
    s.add_argument("agent_id")
    s.add_argument("model", help="openai:NAME, anthropic:NAME, scripted:PATH or replay:PATH")
    s.add_argument("--base-url", help="the provider's endpoint (an OpenAI-compatible server)")
    s.add_argument("--api-key-secret", help="the vault secret (or variable) holding the key")
    s.add_argument("--context-window", type=int, help="the model's window, in tokens")
    s.add_argument("--max-tokens", type=int, help="the most tokens of one answer")
    s.set_defaults(func=cmd_model_set)


def cmd_model_set(args: argparse.Namespace) -> int:
    model: str | dict[str, object] = args.model
    extra = {
        k: v
        for k, v in (
            ("base_url", args.base_url),
            ("api_key_secret", args.api_key_secret),
            ("context_window", args.context_window),
            ("max_tokens", args.max_tokens),
        )
        if v is not None
    }
    if extra:
        provider, _, name = args.model.partition(":")
        model = {"provider": provider, "name": name, **extra}
    with runtime_for(args) as rt:
        state = rt.set_model(args.agent_id, model)
        ref = (state.model_override or {}).get("model")
        if wants_json(args):
            emit_json({"agent_id": state.agent_id, "model": ref, "version": state.version})
        else:
            err.print(f"agent {state.agent_id} decides with {ref} from its next decision on")
    return 0
