"""Integrity: checking that what is stored is what happened."""
