"""Text a submission wrote, made safe to print, store and open: escaped, bounded, never a formula.

Anything that came from a student's code — an exception's text, a note, what
it printed, its file's name — may hold terminal escape codes (``\\x1b[2K``
erases a row of the teacher's screen), lone surrogates (no UTF-8 writer
accepts them), bidirectional overrides, or start with ``=`` (a spreadsheet
runs it as a formula). These helpers make it plain text::

    >>> safe_text("\\x1b[1A done \\ud800")
    '\\\\x1b[1A done \\\\ud800'
    >>> spreadsheet_cell("=HYPERLINK(1)")
    "'=HYPERLINK(1)"
"""

import hashlib
import re
from typing import Any

__all__ = ["safe_text", "safe_tree", "spreadsheet_cell", "file_stem"]

# Control characters (C0 but newline and tab, DEL, C1), lone surrogates, and the bidirectional
# controls that can make text display in another order than it reads.
_UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_UNSAFE_IN_LINE = re.compile("[\x00-\x1f\x7f-\x9f\ud800-\udfff\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(match: Any) -> Any:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def safe_text(value: Any, limit: Any = None, *, lines: bool = False) -> Any:
    """``str(value)`` with every control character escaped (``\\x1b``), cut to ``limit`` characters.

    With ``lines=True`` newlines and tabs are kept (printed output); otherwise
    they are escaped too, so the text stays one line.
    """
    text = (_UNSAFE if lines else _UNSAFE_IN_LINE).sub(_escape, str(value))
    if limit is not None and len(text) > limit:
        text = text[: limit - 1] + "…"
    return text


def safe_tree(value: Any, limit: int = 400, depth: int = 0) -> Any:
    """A JSON value (a child's reply) with every string in it made :func:`safe_text`; other types as they are."""
    if depth > 64:  # the wire refuses deeper headers already; this only keeps the walk bounded
        return None
    if isinstance(value, str):
        return safe_text(value, limit)
    if isinstance(value, list):
        return [safe_tree(item, limit, depth + 1) for item in value]
    if isinstance(value, dict):
        return {safe_text(key, limit): safe_tree(item, limit, depth + 1) for key, item in value.items()}
    return value


def spreadsheet_cell(value: Any) -> Any:
    """A CSV cell a spreadsheet shows as text: a leading ``= + - @``, tab or CR gets a ``'`` in front (OWASP)."""
    if isinstance(value, str) and value[:1] in ("=", "+", "-", "@", "\t", "\r"):
        return "'" + value
    return value


def file_stem(name: str, limit: int = 80) -> Any:
    """A safe, short file name for ``name`` (a student): escaped, and cut with a digest when too long."""
    text = safe_text(name).replace("/", "_").replace("\\", "_")
    if text in ("", ".", ".."):
        text = f"_{text}"
    if len(text.encode("utf-8")) > limit or text != name:
        digest = hashlib.sha256(name.encode("utf-8", "surrogateescape")).hexdigest()[:10]
        text = f"{text.encode('utf-8')[: limit - 11].decode('utf-8', 'ignore')}-{digest}"
    return text
