"""``python -m harness`` is the ``harness`` command."""

import sys

from .cli import main

sys.exit(main())
