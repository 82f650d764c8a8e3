"""Upgrades of live agents: a new version of a spec applied to agents made from an
older one, journaled, checked, and tried on a few first (``stead upgrade``).

* :mod:`~stead.upgrades.plan`: what an upgrade changes and whether it may (pure);
* :mod:`~stead.upgrades.apply`: applying it as one ``spec_upgraded`` event, the
  versions an agent has had, and which one was in force at a given event;
* :mod:`~stead.upgrades.canary`: a few agents first, watched, then the rest or back.
"""
