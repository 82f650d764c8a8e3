"""Messages and delegations between agents: signed envelopes delivered into a journal.

The pure checks (what an envelope must say, what a delegation may give) are in
:mod:`stead.governance`; delivering one, under the receiver's lease and into
its journal, is :mod:`stead.messaging.delivery`.
"""
