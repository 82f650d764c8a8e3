"""Governance: who may do what, checked at the moment of action.

Authority is data in the store: autonomy levels, grants and approvals are
journal events folded into the agent's state, policies are versioned per
tenant, and identities are key pairs whose public half is journaled. The
modules here are pure (no store, no clock of their own); the runtime asks them
at each call and journals what they answer.
"""
