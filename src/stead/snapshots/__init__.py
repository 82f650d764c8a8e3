"""Portable forms of an agent: the archive written by ``stead export``."""
