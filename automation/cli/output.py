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
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NoReturn, TypeVar

import click

from automation.errors import EXIT_FAILURE, AnycloudError

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
    """``data`` (models, or JSON as parsed) as indented JSON; non-ASCII text as UTF-8."""
    if "pydantic_core" in sys.modules:
        # Its encoder, loaded anyway by the models: json.dumps with an indent runs the
        # pure-Python encoder, a quarter of embedded `node-pool list --json` with 1,000 pools.
        from pydantic_core import to_json

        text = to_json(to_jsonable(data), indent=2).decode()
    else:
        # A thin remote command: the server's JSON, and no model in it (none was loaded).
        # Importing pydantic_core to encode it would cost more than the stdlib encoder.
        import json

        text = json.dumps(data, indent=2, ensure_ascii=False)
    sys.stdout.write(text + "\n")


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
    """The one error boundary of a command (``main.cli`` adds the same around parsing).

    Domain errors print one line (or a JSON error object) and exit with their code. An
    exception that escaped from input the command did not check (a path that is missing or
    too long, a NUL byte: ``inputs.from_input``) is bad input, exit 2. Anything else is our
    bug: one line naming where the traceback was written, exit 1.
    """

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise  # click's usage errors: already exit 2 with its message
        except Exception as exc:  # the boundary: everything ends here
            fail(exc, as_json=bool(kwargs.get("as_json")), kwargs=kwargs)

    wrapper.anycloud_boundary = True  # type: ignore[attr-defined]  # the fuzz test checks it
    return wrapper  # type: ignore[return-value]


def fail(exc: Exception, *, as_json: bool, kwargs: Mapping[str, Any] | None = None) -> NoReturn:
    """Report ``exc`` as the boundary does and exit."""
    from automation.cli import inputs

    err = exc if isinstance(exc, AnycloudError) else inputs.from_input(
        exc, kwargs or {}, click.get_current_context(silent=True))
    if err is None:
        report = _crash_report(exc)
        what = f"{type(exc).__name__}: {_one_line(str(exc))}"
        if as_json:
            print_json({"error": {"code": "INTERNAL", "message": what, "report": report}})
        else:
            click.echo(f"Error [INTERNAL]: {what} (full report: {report})", err=True)
        sys.exit(EXIT_FAILURE)
    if as_json:
        out = err.to_dict()
        if "value" in out:
            out["value"] = inputs.short_value(out["value"])
        out["message"] = _message(err)
        print_json({"error": out})
    else:
        click.echo(f"Error [{err.code}]: {_message(err)}", err=True)
    sys.exit(err.exit_code)


def _message(err: AnycloudError) -> str:
    """The error's message on one line, its value shortened (a 5,000-character name is
    shown by its first 80)."""
    from automation.cli import inputs

    message = err.message
    if isinstance(err.value, str) and len(repr(err.value)) > inputs.SHOWN_LIMIT:
        message = message.replace(repr(err.value), inputs.shown(err.value))
        message = message.replace(err.value, inputs.shown(err.value))
    return _one_line(message)


def _one_line(text: str, limit: int = 500) -> str:
    text = "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _crash_report(exc: BaseException) -> str:
    """The traceback written by ``reports.write_crash_report`` (mode 0600) under the state
    directory, where the control loop writes its own, else under the temp dir when the home
    is unusable; returns the file's path. Called inside the ``except`` block."""
    import tempfile
    from pathlib import Path

    from automation.reports import write_crash_report
    from automation.settings import Settings

    ctx = click.get_current_context(silent=True)
    doing = f"running anycloud {ctx.command_path}" if ctx is not None else "running anycloud"
    homes: list[Callable[[], Path]] = [
        lambda: Settings.from_env((ctx.find_root().obj or {}).get("home") if ctx else None).home,
        lambda: Path(tempfile.gettempdir()) / "anycloud"]
    for home in homes:
        try:
            return str(write_crash_report(home(), doing))
        except (OSError, ValueError, AnycloudError):  # an unusable home: the next one
            continue
    return "(not written: no writable directory)"
