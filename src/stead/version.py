"""The package's one version: what ``stead --version`` says, what the build stamps on
the wheel, and what a store records of the stead that migrated it."""

__version__ = "0.1.0"
