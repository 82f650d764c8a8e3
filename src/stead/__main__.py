"""``python -m stead`` is the ``stead`` command."""

import sys

from .cli.main import main

sys.exit(main())
