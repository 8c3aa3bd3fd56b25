"""``python -m minitask``: the same as the ``minitask`` command."""
from __future__ import annotations

import sys

from .cli import main

sys.exit(main())
