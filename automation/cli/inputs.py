"""What the CLI does with input that the commands themselves did not check.

Two halves:

- ``shown``: a value as it appears in an error line: ``repr`` (so NUL, newlines and escape
  sequences stay visible and on one line), cut to ``SHOWN_LIMIT`` characters.
- ``from_input``: an exception a command let escape, attributed to the argument it came from
  (an ``OSError`` naming a file the user gave, ``embedded null byte`` when an argument holds
  one, an encoding error when an argument holds undecodable text) and turned into
  ``InvalidInput`` (exit 2). Anything it cannot attribute stays an internal error: blanket
  catching would hide our own bugs behind "bad input".

The rules themselves belong where the input is read (``InputPath`` for file arguments, the
services for names and numbers); this is the net under them.
"""

from __future__ import annotations

import errno
import os
from collections.abc import Mapping
from pathlib import Path, PurePath
from typing import Any

import click

from automation.errors import InvalidInput

SHOWN_LIMIT = 80


def shown(value: Any, limit: int = SHOWN_LIMIT) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def short_value(value: Any, limit: int = SHOWN_LIMIT) -> Any:
    """A string value cut for a ``--json`` error object (other values as they are)."""
    if isinstance(value, str) and len(value) > limit:
        return value[: limit - 3] + "..."
    return value


_ERRNO_RULES = {
    errno.ENOENT: "must be an existing file",
    errno.ENOTDIR: "must be a path whose parents are directories",
    errno.EISDIR: "must be a file, not a directory",
    errno.EACCES: "must be readable by this user",
    errno.EPERM: "must be readable by this user",
    errno.ENAMETOOLONG: "must be a path the system accepts (a name in it is too long)",
    errno.ELOOP: "must not be a symbolic link loop",
}


def path_rule(exc: OSError) -> str:
    return _ERRNO_RULES.get(exc.errno or 0, f"must be a usable path ({exc.strerror})")


def _param_names(ctx: click.Context | None) -> dict[str, str]:
    """Keyword name -> how the user wrote it (``kubeconfig`` -> ``--kubeconfig``)."""
    names: dict[str, str] = {}
    for param in ctx.command.params if ctx is not None else []:
        if param.name is None:
            continue
        opts = [o for o in param.opts if o.startswith("--")] or param.opts
        names[param.name] = max(opts, key=len) if isinstance(param, click.Option) else param.name
    return names


def _values(value: Any) -> list[Any]:
    return list(value) if isinstance(value, (list, tuple)) else [value]


def from_input(exc: BaseException, kwargs: Mapping[str, Any],
               ctx: click.Context | None = None) -> InvalidInput | None:
    """The input error ``exc`` stands for, when one of the arguments in ``kwargs`` caused it."""
    names = _param_names(ctx)

    def pick(test: Any) -> tuple[str, Any] | None:
        for key, raw in kwargs.items():
            for value in _values(raw):
                if isinstance(value, (str, PurePath)) and test(value):
                    return names.get(key, key), str(value)
        return None

    if isinstance(exc, OSError) and exc.filename is not None:
        target = os.fsdecode(exc.filename) if isinstance(exc.filename, bytes) else str(
            exc.filename)
        found = pick(lambda v: str(v) == target or os.path.abspath(os.path.expanduser(
            str(v))) == os.path.abspath(target))
        if found:
            return InvalidInput(found[0], found[1], path_rule(exc))
    if isinstance(exc, ValueError) and "null" in str(exc):
        found = pick(lambda v: "\x00" in str(v))
        if found:
            return InvalidInput(found[0], found[1], "must not contain a NUL byte")
    if isinstance(exc, UnicodeError):
        found = pick(lambda v: not _encodes(str(v)))
        if found:
            return InvalidInput(found[0], found[1], "must be valid UTF-8 text")
    return None


def _encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeError:
        return False
    return True


# Linux limits; pathconf would need an existing directory to ask.
NAME_MAX = 255
PATH_MAX = 4096


def check_path_text(value: str) -> str | None:
    """Why ``value`` cannot name a file at all (before touching the disk), or None."""
    if "\x00" in value:
        return "must not contain a NUL byte"
    encoded = os.fsencode(value)
    if len(encoded) >= PATH_MAX:
        return f"must be shorter than {PATH_MAX} bytes"
    if any(len(part) > NAME_MAX for part in encoded.split(b"/")):
        return f"must not have a name longer than {NAME_MAX} bytes"
    return None


def read_local_text(field: str, named: Any, what: str = "a readable text file") -> str:
    """A file on this machine, read to be sent to the API (which cannot read it): a name that
    cannot be a path, or a file that cannot be read as text, refused by ``field``."""
    text = str(named)
    why = check_path_text(text)
    if why is not None:
        raise InvalidInput(field, text, why)
    path = Path(text).expanduser()
    try:
        return path.read_text()
    except (OSError, UnicodeError) as exc:
        raise InvalidInput(field, str(path), f"must be {what} "
                           f"({getattr(exc, 'strerror', None) or exc})") from None


class InputPath(click.Path):
    """``click.Path`` that refuses NUL bytes and over-long names as usage errors (exit 2),
    where ``click.Path`` lets ``os.stat``'s ValueError escape or calls the name missing."""

    def convert(self, value: Any, param: click.Parameter | None,
                ctx: click.Context | None) -> Any:
        if isinstance(value, str) and not (self.allow_dash and value == "-"):
            why = check_path_text(value)
            if why is not None:
                self.fail(f"{shown(value)}: {why}", param, ctx)
        return super().convert(value, param, ctx)
