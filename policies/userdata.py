"""User data: decoding, the pinned K3s checksum, and the node taint/labels it passes to K3s.

The checks are deliberately textual (we cannot run the script), and err on the side of
refusing: a checksum counts only when a literal 64-hex value (directly, through a shell
variable assigned a literal, or in a file the script itself wrote from a literal) is
compared with the sha256 of a file whose path names k3s.
"""

from __future__ import annotations

import base64
import binascii
import email
import gzip
import re
import shlex
from dataclasses import dataclass, field

import yaml

HEX64 = re.compile(r"(?<![0-9A-Fa-f])[0-9A-Fa-f]{64}(?![0-9A-Fa-f])")
# The command word only: not `sha256sum-amd64.txt` in a URL, not `k3s.sha256` as a path.
_SHA_TOOL = re.compile(
    r"(?<![\w.-])(?:sha256sum|shasum\s+(?:-a|--algorithm)\s*256|openssl\s+(?:dgst\s+)?-sha256)"
    r"(?![\w.-])"
)
# `-c`, `--check` or a flag cluster containing c (`-sc`), read right after the tool.
_CHECK_FLAG = re.compile(r"(?:^|\s)(?:--check|-[A-Za-z]*c[A-Za-z]*)(?=\s|$)")
_COMPARE = re.compile(r"(?:\s(?:=|==|!=|-eq)\s|\bgrep\b|\bcmp\b|\bdiff\b|\bcase\b|\btest\b)")
_ASSIGN = re.compile(
    r"^(?:export\s+|readonly\s+|local\s+|declare\s+(?:-\w+\s+)?)?"
    r"([A-Za-z_][A-Za-z0-9_]*)=(['\"]?)([0-9A-Fa-f]{64})\2$"
)
_HEREDOC = re.compile(r"(?<!<)<<-?(?!<)\s*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\1")
_WRITE_TARGET = re.compile(r"(?:>>?|\btee\s+(?:-a\s+)?)\s*(['\"]?)([^\s'\";|&<>]+)\1")
_INSTALL_SCRIPT = re.compile(r"get\.k3s\.io|k3s-io/k3s/[^\s]*install\.sh|/install\.sh\b")
_SKIP_DOWNLOAD = re.compile(r"INSTALL_K3S_SKIP_DOWNLOAD=['\"]?true")


def decode_base64_text(value: str) -> str:
    """Base64 (optionally of gzip) to text; ValueError when it is not."""
    compact = "".join(value.split())
    try:
        raw = base64.b64decode(compact, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"not valid base64: {exc}") from exc
    if raw[:2] == b"\x1f\x8b":
        raw = gzip.decompress(raw)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError("base64 does not decode to UTF-8 text") from exc


def decode_maybe_base64(value: str) -> str:
    """AWS ``userData`` may be plain text or base64: a script is almost never valid base64."""
    compact = "".join(value.split())
    if compact and len(compact) % 4 == 0 and re.fullmatch(r"[A-Za-z0-9+/]+=*", compact):
        try:
            return decode_base64_text(compact)
        except ValueError:
            pass
    return value


def expand_multipart(text: str) -> str:
    """Cloud-init MIME multipart: concatenate every decoded part so each is scanned."""
    head = text.lstrip()[:200].lower()
    if not (head.startswith("content-type: multipart") or head.startswith("mime-version")):
        return text
    message = email.message_from_string(text.lstrip())
    parts: list[str] = []
    for part in message.walk():
        if part.is_multipart():
            continue
        payload = part.get_payload(decode=True)
        if isinstance(payload, bytes):
            if payload[:2] == b"\x1f\x8b":
                payload = gzip.decompress(payload)
            parts.append(payload.decode("utf-8", errors="replace"))
    return "\n".join(parts) if parts else text


# --- shell-ish scanning -------------------------------------------------------------------------


def _strip_comment(line: str) -> str:
    """Drop an unquoted ``#`` comment (a ``#`` starting a word)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i]
    return line


def _split_statements(line: str) -> list[str]:
    """Split on unquoted ``;``, ``&&``, ``||`` outside ``$(...)``; keep pipes together."""
    out: list[str] = []
    quote, depth, start, i = "", 0, 0, 0
    while i < len(line):
        ch = line[i]
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        elif depth == 0 and (ch == ";" or line[i : i + 2] in ("&&", "||")):
            out.append(line[start:i])
            i += 1 if ch == ";" else 2
            start = i
            continue
        i += 1
    out.append(line[start:])
    return [s.strip() for s in out if s.strip()]


@dataclass
class _Script:
    statements: list[str] = field(default_factory=list)
    literal_files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class UserData:
    """What a VM runs at boot, flattened for scanning."""

    text: str  # shell-ish text: the script, or a cloud-config's commands and file contents
    files: dict[str, str]  # files cloud-init writes from literals (write_files)


def _file_content(item: dict[str, object]) -> str | None:
    content, encoding = item.get("content"), str(item.get("encoding") or "").lower()
    if not isinstance(content, str):
        return None
    if not encoding or encoding == "text/plain":
        return content
    try:
        raw = base64.b64decode(content)
        if "gz" in encoding:
            raw = gzip.decompress(raw)
        return raw.decode("utf-8")
    except (binascii.Error, ValueError, OSError, EOFError):
        return None


def parse_user_data(text: str) -> UserData:
    """Expand MIME multipart and ``#cloud-config`` into scannable text.

    cloud-config is data, not a script: its ``bootcmd``/``runcmd`` commands and the contents
    of ``write_files`` (decoded) are what runs, so those are scanned, one after the other.
    """
    text = expand_multipart(text)
    if not text.lstrip().startswith("#cloud-config"):
        return UserData(text, {})
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return UserData(text, {})
    if not isinstance(doc, dict):
        return UserData(text, {})
    segments: list[str] = []
    files: dict[str, str] = {}
    for item in doc.get("write_files") or []:
        if isinstance(item, dict) and isinstance(item.get("path"), str):
            content = _file_content(item)
            if content is not None:
                files[item["path"]] = content
                segments.append(content)
    for key in ("bootcmd", "runcmd"):
        for cmd in doc.get(key) or []:
            if isinstance(cmd, list):
                segments.append(" ".join(shlex.quote(str(c)) for c in cmd))
            elif isinstance(cmd, str):
                segments.append(cmd)
    return UserData("\n".join(segments), files)


def _parse(doc: UserData) -> _Script:
    script = _Script(literal_files=dict(doc.files))
    raw_lines = doc.text.replace("\\\n", " ").splitlines()
    variables: dict[str, str] = {}
    i = 0
    while i < len(raw_lines):
        line = _strip_comment(raw_lines[i]).strip()
        i += 1
        if not line:
            continue
        heredoc = _HEREDOC.search(line)
        body = ""
        if heredoc:
            end = heredoc.group(2)
            body_lines: list[str] = []
            while i < len(raw_lines) and raw_lines[i].strip() != end:
                body_lines.append(raw_lines[i])
                i += 1
            i += 1
            body = "\n".join(body_lines)
        for stmt in _split_statements(line):
            m = _ASSIGN.match(stmt)
            if m:
                variables[m.group(1)] = m.group(3)
                continue
            stmt = _expand(stmt, variables)
            full = f"{stmt}\n{_expand(body, variables)}" if heredoc and body else stmt
            script.statements.append(full)
            target = _WRITE_TARGET.search(stmt)
            if target and (heredoc or re.match(r"^(echo|printf)\b", stmt)):
                content = _expand(body, variables) if heredoc else stmt
                script.literal_files[target.group(2)] = content
    return script


def _expand(stmt: str, variables: dict[str, str]) -> str:
    def sub(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        return variables.get(name, m.group(0))

    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)", sub, stmt)


@dataclass(frozen=True)
class ChecksumFinding:
    pinned: str | None  # the literal checksum the k3s binary is checked against
    install_script_downloads: bool  # get.k3s.io fetches k3s and a checksum beside it


_FETCH = re.compile(r"(?<![\w.-])(?:curl|wget)(?![\w.-])")
_OUT_FLAG = re.compile(r"(?:^|\s)(?:--output(?:-document)?[=\s]\s*|-[A-Za-z]*[oO]\s*)(\S+)")
_MOVE = re.compile(r"^(?:sudo\s+)?(?:mv|cp|install)\b")


def _norm(text: str) -> str:
    """Quotes dropped and ``${x}`` spelled ``$x``, so paths compare as written."""
    return re.sub(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", r"$\1", text.replace('"', "").replace("'", ""))


def _mentions(stmt: str, token: str) -> bool:
    return re.search(rf"(?<![\w$/.-]){re.escape(token)}(?![\w/.-])", stmt) is not None


def _download_targets(statements: list[str]) -> dict[str, int]:
    """Where the script saves k3s -> index of the statement that put it there: the output of
    curl/wget fetching a k3s URL (not a checksum file), then wherever mv/cp/install moves it."""
    targets: dict[str, int] = {}
    for index, stmt in enumerate(_norm(s.split("\n", 1)[0]) for s in statements):
        if _FETCH.search(stmt) and "k3s" in stmt.lower() and "sha256" not in stmt.lower():
            for m in [*_OUT_FLAG.finditer(stmt), *_WRITE_TARGET.finditer(stmt)]:
                target = m.group(m.lastindex or 1)
                # `curl -O <url>` saves under the URL's basename.
                target = target.rsplit("/", 1)[-1] if "://" in target else target
                if target != "-":
                    targets.setdefault(target, index)
        elif _MOVE.match(stmt) and any(_mentions(stmt, t) for t in targets):
            targets.setdefault(stmt.split()[-1], index)
    return targets


def find_k3s_checksum(text: str) -> ChecksumFinding:
    script = _parse(parse_user_data(text))
    targets = _download_targets(script.statements)

    def about_k3s(stmt: str, index: int) -> bool:
        # With a download in sight, the check must cover the downloaded file (or where it
        # was moved) after it got there; otherwise any path naming k3s (a baked-in binary).
        norm = _norm(stmt)
        if targets:
            return any(_mentions(norm, t) for t, at in targets.items() if at < index)
        return "k3s" in norm.lower()

    pinned: str | None = None
    for index, stmt in enumerate(script.statements):
        if not _SHA_TOOL.search(stmt):
            continue
        hexes = HEX64.findall(stmt)
        first_line = stmt.split("\n", 1)[0]
        checks = any(
            _CHECK_FLAG.search(first_line[m.end() :].split("|", 1)[0])
            for m in _SHA_TOOL.finditer(first_line)
        )
        if hexes and about_k3s(stmt, index) and (checks or _COMPARE.search(stmt)):
            pinned = hexes[0].lower()
            break
        if checks and not hexes:
            # `sha256sum -c FILE`: only a file this script wrote from a literal counts.
            for path, content in script.literal_files.items():
                if (
                    _mentions(_norm(stmt), path)
                    and HEX64.search(content)
                    and about_k3s(content, index)
                ):
                    pinned = HEX64.findall(content)[0].lower()
                    break
            if pinned:
                break
    downloads = any(
        _INSTALL_SCRIPT.search(s) and not _SKIP_DOWNLOAD.search(text) for s in script.statements
    )
    return ChecksumFinding(pinned, downloads)


_SSH_OFF = re.compile(
    r"\bsystemctl\s+(?:disable|mask)\b[^\n]*\bssh(?:d)?(?:\.service|\.socket)?(?![\w.-])"
)


def disables_password_ssh(text: str) -> bool:
    """cloud-config ``ssh_pwauth: false``, or a ``systemctl disable|mask ssh`` in the script."""
    text = expand_multipart(text)
    if text.lstrip().startswith("#cloud-config"):
        try:
            doc = yaml.safe_load(text)
        except yaml.YAMLError:
            doc = None
        if isinstance(doc, dict) and doc.get("ssh_pwauth") in (False, "false", "no"):
            return True
    return any(_SSH_OFF.search(stmt) for stmt in _parse(parse_user_data(text)).statements)


_ANYCLOUD_KV = re.compile(r"anycloud\.sh/([a-z][a-z0-9-]*)=([A-Za-z0-9._-]+)(?::([A-Za-z]+))?")


@dataclass(frozen=True)
class NodeRegistration:
    labels: dict[str, set[str]]  # anycloud.sh/<key> -> values seen
    taints: set[tuple[str, str, str]]  # (key, value, effect)


def find_node_registration(text: str) -> NodeRegistration:
    """``anycloud.sh/<k>=<v>`` occurrences: with ``:<Effect>`` a taint, otherwise a label."""
    labels: dict[str, set[str]] = {}
    taints: set[tuple[str, str, str]] = set()
    for stmt_line in parse_user_data(text).text.splitlines():
        line = _strip_comment(stmt_line)
        for m in _ANYCLOUD_KV.finditer(line):
            key, value, effect = f"anycloud.sh/{m.group(1)}", m.group(2), m.group(3)
            if effect:
                taints.add((key, value, effect))
            else:
                labels.setdefault(key, set()).add(value)
    return NodeRegistration(labels, taints)
