"""``python -m gpuscope``: the command line, which ``_cli.py`` holds.

``main`` is also the ``gpuscope`` console script's entry point
(pyproject.toml). Nothing else lives here: a module run with ``python -m``
is ``__main__``, and importing it by name would load a second copy of it,
so no other module imports this one.
"""

from __future__ import annotations

import sys

from ._cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
