"""Workers that keep many agents in flight at once (see :mod:`.parked`)."""
