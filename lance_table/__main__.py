"""``python -m lance_table``: the ``lance-table`` command line (see :mod:`lance_table.cli`)."""

from __future__ import annotations

import sys

from lance_table.cli import main

if __name__ == "__main__":
    sys.exit(main())
