"""Text from elsewhere (saved files, phase names), made safe to print."""

from __future__ import annotations

from typing import Any

from . import _gpuscope


def printable(value: Any) -> str:
    """``value`` as text that cannot move the cursor, rewrite a line or hide
    what follows it on a terminal: control and invisible characters (ESC, CR,
    NEL, zero-width and bidirectional-override characters, ...) are escaped
    (``\\e``, ``\\r``, ``\\u{202E}``), and so are lone surrogates (which a
    file name decoded with ``os.fsdecode`` may hold), as ``\\xNN`` bytes.
    The same rules as the C++ reports (``gpuscope::EscapeForTerminal``)."""
    text = value if isinstance(value, str) else str(value)
    return _gpuscope.escape_for_terminal(text.encode("utf-8", "surrogatepass"))
