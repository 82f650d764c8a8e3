"""The ``stead`` command line."""
