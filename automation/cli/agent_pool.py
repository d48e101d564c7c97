"""``anycloud agent-pool validate``: check AgentPool manifests offline, with the verdict the
API server gives them under k8s/crd/agentpool-crd.yaml (no cluster needed)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from automation.cli.inputs import InputPath
from automation.cli.output import handle_errors, info, json_option, print_json, print_table


@click.group("agent-pool")
def agent_pool() -> None:
    """AgentPool custom resources (anycloud.sh/v1): pools of agents declared in Kubernetes."""


@agent_pool.command("validate")
@click.option("-f", "--filename", "files", multiple=True, required=True,
              type=InputPath(dir_okay=False, allow_dash=True),
              help="A YAML file of one or more documents ('-' reads stdin); repeatable.")
@json_option
@handle_errors
def validate(files: tuple[str, ...], as_json: bool) -> None:
    """Say of every document whether the API server would accept it: the CRD's types,
    bounds, defaults and CEL rules, and kubectl apply's refusal of unknown fields. Documents
    of other API groups (a ConfigMap beside its pools) are skipped. Exit 2 when any AgentPool
    is invalid, naming its document (1-based), field, value and rule."""
    from automation.agentpools.model import check_stream
    from automation.errors import EXIT_BAD_INPUT, InvalidInput

    verdicts = []
    for path in files:
        try:
            text = sys.stdin.read() if path == "-" else Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise InvalidInput("-f", path, f"must be a readable file ({exc.strerror})") from exc
        except UnicodeDecodeError as exc:
            raise InvalidInput("-f", path, f"must be UTF-8 text (byte {exc.start} is not)") \
                from exc
        verdicts += check_stream(text, "stdin" if path == "-" else path)
    invalid = [v for v in verdicts if v.verdict == "invalid"]
    if as_json:
        print_json({"valid": not invalid, "documents": verdicts})
    else:
        rows = []
        for v in verdicts:
            if v.verdict == "valid" and v.autoscaler is not None:
                a = v.autoscaler
                detail = (f"replicas {a.min_replicas}..{a.max_replicas}, idle slots "
                          f"{a.min_idle}..{a.max_idle}, {a.default_slots_per_agent} slot(s) "
                          "per agent")
            elif v.verdict == "invalid":
                detail = "; ".join(p["message"] for p in v.problems)
            else:
                detail = "not an anycloud.sh object"
            rows.append((f"{v.source}#{v.index}", v.kind, v.name, v.namespace, v.verdict,
                         detail))
        print_table(None, ["DOCUMENT", "KIND", "NAME", "NAMESPACE", "VERDICT", "DETAIL"], rows)
        if not verdicts:
            info("no documents found")
    if invalid:
        first = invalid[0]
        problem = first.problems[0]
        shown = "" if len(invalid) == 1 else f" (and {len(invalid) - 1} more invalid)"
        if not as_json:
            click.echo(f"Error [INVALID_ARGUMENT]: {first.source} document {first.index} "
                       f"({first.name or 'unnamed'}): {problem['message']}{shown}", err=True)
        sys.exit(EXIT_BAD_INPUT)
