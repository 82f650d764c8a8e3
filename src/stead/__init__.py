"""stead."""
