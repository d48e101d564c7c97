"""Rendering for the CLI: JSON or rich tables on stdout, messages on stderr, error mapping.

rich is imported only when a human is being shown something; ``--json`` paths skip it.

JSON convention: every key of every ``--json`` output is camelCase (``ingressEntryIp``,
``lastErrorCode``, ``factsSource``, ``createdAt``). The models keep snake_case attributes and
serialize by alias (``automation.models.CamelModel``), so ``to_jsonable``'s
``model_dump(mode="json")`` gives camelCase; dicts built by hand in ``automation/cli`` use
camelCase keys themselves. Left as they are: values (ids, states, error ``field`` names such
as ``node_pool``), maps whose keys are data rather than field names (labels, tags, pool ids),
and ``node-pool plan``'s resource ``inputs``, which are the engine's wire-format names.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

import click

from automation.errors import AnycloudError

F = TypeVar("F", bound=Callable[..., Any])


def json_option(fn: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON on stdout.")(fn)


def engine_option(fn: F) -> F:
    return click.option(
        "--engine", type=click.Choice(["pulumi", "mock"]),
        help="pulumi (the default; ANYCLOUD_ENGINE sets it) or mock (the SDK's mock engine, "
             "labelled mock in all its output).")(fn)


def to_jsonable(data: Any) -> Any:
    if hasattr(data, "model_dump"):  # a pydantic model (not imported here: --help stays fast)
        return data.model_dump(mode="json")
    if isinstance(data, (list, tuple)):
        return [to_jsonable(d) for d in data]
    if isinstance(data, dict):
        return {k: to_jsonable(v) for k, v in data.items()}
    return data


def camel(key: str) -> str:
    """``node_state`` -> ``nodeState`` (what pydantic's ``to_camel`` gives, without pydantic)."""
    head, *rest = key.split("_")
    return head + "".join(word[:1].upper() + word[1:] for word in rest)


def camel_keys(data: dict[str, Any]) -> dict[str, Any]:
    """The top-level keys of an event's ``data`` in camelCase; nested maps (labels) as given."""
    return {camel(k): v for k, v in data.items()}


def print_json(data: Any) -> None:
    # pydantic_core's encoder (loaded anyway by the models every --json command prints):
    # json.dumps with an indent runs the pure-Python encoder, a quarter of `node-pool list
    # --json`'s time with 1,000 pools. Same document; non-ASCII text is written as UTF-8.
    from pydantic_core import to_json

    sys.stdout.write(to_json(to_jsonable(data), indent=2).decode() + "\n")


def _console() -> Any:
    from rich.console import Console

    console = Console()
    # Piped output is read by scripts and grep: never truncate cells to 80 columns there.
    return console if console.is_terminal else Console(width=4096)


def print_table(title: str | None, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left", header_style="bold")
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*("-" if v is None else str(v) for v in row))
    _console().print(table)


def print_fields(title: str, fields: Sequence[tuple[str, Any]]) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left", show_header=False, box=None)
    table.add_column(style="bold")
    table.add_column()
    for key, value in fields:
        table.add_row(key, "-" if value is None else str(value))
    _console().print(table)


def info(message: str) -> None:
    click.echo(message, err=True)


def handle_errors(fn: F) -> F:
    """Turn domain errors into a message (or a JSON error object) and their exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except AnycloudError as err:
            if kwargs.get("as_json"):
                print_json({"error": err.to_dict()})
            else:
                click.echo(f"Error [{err.code}]: {err.message}", err=True)
            sys.exit(err.exit_code)

    return wrapper  # type: ignore[return-value]
