"""Reading wire-format (camelCase) resource properties the way both paths present them.

Real engine: ``args.props`` is the SDK's unknown-checking proxy. Secret values arrive as
plain values (``Analyze`` deserializes without keeping the secret marker), and a value not
known during preview raises ``UnknownValueError`` when read. The SDK turns that exception
into an advisory "can't run policy during preview" note and the check runs for real at
``up``, when every input is known.

Offline: the mock-engine run replaces secret values with ``"[secret]"``. ``offline_props``
wraps the inputs so reading such a value raises ``RedactedValueError`` (a subclass of
``UnknownValueError``): the rule is reported as not verified instead of passing or failing
on a placeholder. Rules therefore read properties only through ``Mapping``/``Sequence``
(never ``isinstance(x, dict)``), so the same code runs over both proxies.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pulumi_policy.proxy import (
    UNKNOWN_ARCHIVE_VALUE,
    UNKNOWN_ARRAY_VALUE,
    UNKNOWN_ASSET_VALUE,
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE,
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
    UnknownValueError,
)

SECRET_PLACEHOLDER = "[secret]"
# What the mock-engine run writes for a value not known during a preview.
UNKNOWN_PLACEHOLDER = "[unknown]"

_UNKNOWN_SENTINELS = frozenset(
    {
        UNKNOWN_BOOLEAN_VALUE,
        UNKNOWN_NUMBER_VALUE,
        UNKNOWN_STRING_VALUE,
        UNKNOWN_ARRAY_VALUE,
        UNKNOWN_ASSET_VALUE,
        UNKNOWN_ARCHIVE_VALUE,
        UNKNOWN_OBJECT_VALUE,
    }
)


class NotVerifiableError(UnknownValueError):
    """A check could not read its input. Subclasses ``UnknownValueError`` so the engine's SDK
    reports it as an advisory "can't run policy" note rather than a crash."""

    def __init__(self, message: str, props: Sequence[str] = ()) -> None:
        Exception.__init__(self, message)
        self.unknown_type_sentinel = UNKNOWN_STRING_VALUE
        self.props = list(props)
        self.message = message


class RedactedValueError(NotVerifiableError):
    def __init__(self, path: Sequence[str]) -> None:
        dotted = ".".join(path)
        super().__init__(
            f"secret value at .{dotted} is redacted ({SECRET_PLACEHOLDER!r}) in the offline run; "
            "pass it in plaintext with its key in secret_keys, or rely on the real pack "
            "at preview/up, which sees it",
            path,
        )


def _check(value: Any, path: list[str]) -> Any:
    if isinstance(value, str):
        if value == SECRET_PLACEHOLDER:
            raise RedactedValueError(path)
        if value in _UNKNOWN_SENTINELS:
            raise UnknownValueError(value, path)
        if value == UNKNOWN_PLACEHOLDER:
            raise NotVerifiableError(
                f"value at .{'.'.join(path)} is unknown until the resources it depends on exist",
                path,
            )
    return value


class _OfflineDict(Mapping[str, Any]):
    def __init__(self, target: Mapping[str, Any], path: list[str]) -> None:
        self._target = target
        self._path = path

    def __getitem__(self, key: str) -> Any:
        path = [*self._path, str(key)]
        return _wrap(_check(self._target[key], path), path)

    def __iter__(self) -> Any:
        return iter(self._target)

    def __len__(self) -> int:
        return len(self._target)


class _OfflineList(Sequence[Any]):
    def __init__(self, target: Sequence[Any], path: list[str]) -> None:
        self._target = target
        self._path = path

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self._target)))]
        path = [*self._path, str(index)]
        return _wrap(_check(self._target[index], path), path)

    def __len__(self) -> int:
        return len(self._target)


def _wrap(value: Any, path: list[str]) -> Any:
    if isinstance(value, Mapping):
        return _OfflineDict(value, path)
    if isinstance(value, list | tuple):
        return _OfflineList(value, path)
    return value


def offline_props(inputs: Mapping[str, Any]) -> Mapping[str, Any]:
    """Inputs of an offline resource, raising on redacted or unknown values when read."""
    return _OfflineDict(inputs, [])


# --- small readers ------------------------------------------------------------------------------


def is_mapping(value: Any) -> bool:
    return isinstance(value, Mapping)


def is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def get(props: Any, *path: str | int) -> Any:
    """Value at ``path`` or None when any step is missing; unknown/redacted values raise."""
    node = props
    for step in path:
        if isinstance(step, int):
            if not is_list(node) or step >= len(node):
                return None
            node = node[step]
        else:
            if not is_mapping(node) or step not in node:
                return None
            node = node[step]
    return node


def as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if is_list(value):
        return [value[i] for i in range(len(value))]
    return [value]


def as_str_list(value: Any) -> list[str]:
    return [str(v) for v in as_list(value) if v is not None and v != ""]


def run_checks(checks: Iterable[Callable[[], None]]) -> None:
    """Run every sub-check; re-raise unreadable inputs only after the readable ones reported.

    One unknown field (say, user data during preview) must not hide a violation another
    field shows (say, an SSH key name), so each sub-check runs on its own.
    """
    deferred: list[UnknownValueError] = []
    for check in checks:
        try:
            check()
        except UnknownValueError as exc:
            deferred.append(exc)
    if len(deferred) == 1:
        raise deferred[0]
    if deferred:
        raise NotVerifiableError("; ".join(e.message for e in deferred))


def plain(value: Any) -> Any:
    """A proxied value as plain dicts/lists, for messages; unreadable parts become markers."""
    try:
        if is_mapping(value):
            return {k: plain(_read(value, k)) for k in value}
        if is_list(value):
            return [plain(_read(value, i)) for i in range(len(value))]
    except UnknownValueError:
        return "<unknown>"
    return value


def _read(container: Any, key: Any) -> Any:
    try:
        return container[key]
    except UnknownValueError:
        return "<unknown>"


def show(value: Any) -> str:
    """``repr`` of a property value for a violation message."""
    return repr(plain(value))
