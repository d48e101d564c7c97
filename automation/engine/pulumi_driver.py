"""The Automation API adapter: the only module that needs the ``pulumi`` CLI.

One LocalWorkspace per stack with a persistent work dir under ``$ANYCLOUD_HOME/stacks``
(a temporary dir per call would lose the stack's passphrase salt), the inline program from
``stacks/``, project ``anycloud``. Events stream through a queue to the caller's sink.
Never switches Pulumi's checkpoints off: crash recovery needs the record of in-flight steps.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from automation.engine.errors import EngineFailed, EngineMissing, StackLocked, StackMissing
from automation.engine.events import run_with_events
from automation.engine.plugins import overrides, pin_provider_versions, plugin_version
from automation.engine.runner import (
    ChangeSummary,
    Operation,
    PolicyFinding,
    ProgressEvent,
    ProgressSink,
    RunResult,
    StackKind,
    StackTarget,
)
from automation.engine.secrets import StateSettings, state_settings

PROJECT = "anycloud"
CLOUD_PLUGIN = {"aws": "aws", "gcp": "gcp", "azure": "azure-native"}
VM_TYPES = ("aws:ec2/instance:Instance", "gcp:compute/instance:Instance",
            "azure-native:compute:VirtualMachine")


def policy_pack_dir() -> Path:
    import policies

    return Path(policies.__file__).resolve().parent


def policy_pack() -> str:
    """What the engine gets as ``--policy-pack``: the pack's launcher, an executable the
    engine starts as an analyzer plugin itself (it reads PulumiPolicy.yaml beside it), so
    no Python language host is needed."""
    return str(policy_pack_dir() / "anycloud-policy-pack")


def plugins_for(target: StackTarget, environ: dict[str, str]) -> dict[str, str]:
    """The provider plugins a stack needs, at the versions of the installed SDKs or those
    ``ANYCLOUD_PULUMI_PLUGINS`` names (``automation.engine.plugins``)."""
    names = ["kubernetes"]
    if target.kind is StackKind.NODE_POOL:
        names += [CLOUD_PLUGIN[target.config.provider], "random"]
    return {name: "v" + plugin_version(name, environ) for name in names}


@contextmanager
def private_tmp(home: Path) -> Iterator[Path]:
    """A temporary directory only this run uses, removed afterwards. The engine and its
    plugins get it as TMPDIR: the kubernetes provider writes the cluster's kubeconfig (with
    its credentials) to a temporary file it does not always remove."""
    import shutil
    import tempfile

    root = home / "tmp"
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = Path(tempfile.mkdtemp(prefix="run-", dir=root))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def workspace_options(target: StackTarget, home: Path, state: StateSettings,
                      tmp: Path | None = None) -> Any:
    from pulumi import automation as auto

    work_dir = home / "stacks" / target.stack_name
    work_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    # The policy pack runs as its own python program: give it this interpreter, which has
    # pulumi-policy and the rules installed.
    env = {**state.env, "PULUMI_PYTHON_CMD": sys.executable}
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    return auto.LocalWorkspaceOptions(
        work_dir=str(work_dir),
        project_settings=auto.ProjectSettings(
            name=PROJECT, runtime="python", backend=auto.ProjectBackend(url=state.backend_url)
        ),
        secrets_provider=state.secrets_provider,
        env_vars=env,
    )


def pending_creates(deployment: dict[str, Any]) -> list[str]:
    """URNs of creates an interrupted run left in flight (``pending_operations``)."""
    return sorted(op.get("resource", {}).get("urn", "?")
                  for op in deployment.get("pending_operations") or []
                  if op.get("type") == "creating")


def _diagnostic(err: Exception) -> str:
    """The tail of the engine's stderr (CommandError keeps only its rendered text)."""
    text = str(err)
    stderr = text.split(" stderr: ", 1)[1] if " stderr: " in text else text
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    return "\n".join(lines[-12:])


# The engine's closing lines, which name no cause.
_GENERIC_ERRORS = ("update failed", "preview failed", "refresh failed", "destroy failed",
                   "Resource monitor has terminated, shutting down")


def _engine_errors(messages: list[str]) -> list[str]:
    """The engine's error diagnostics worth showing: the causes, without its closing lines
    (those alone when there is nothing else), at most the last twelve."""
    causes = [m for m in messages if m.strip() not in _GENERIC_ERRORS]
    return (causes or messages)[-12:]


class AutomationRunner:
    """StackRunner over the Pulumi Automation API."""

    engine: Literal["pulumi"] = "pulumi"

    def __init__(self, home: Path, *, environ: dict[str, str] | None = None) -> None:
        self.home = home
        self.environ = dict(os.environ if environ is None else environ)

    @contextmanager
    def _errors(self, target: StackTarget) -> Iterator[None]:
        from pulumi import automation as auto

        try:
            yield
        except FileNotFoundError as exc:
            if "pulumi" in str(exc):
                raise EngineMissing() from exc
            raise
        except auto.ConcurrentUpdateError as exc:
            hint = (f"anycloud node-pool unlock {target.key}" if target.kind is StackKind.NODE_POOL
                    else f"anycloud cluster unlock {target.key}")
            raise StackLocked(target.stack_name, hint, _diagnostic(exc)) from exc
        except auto.StackNotFoundError as exc:
            raise StackMissing(target.stack_name) from exc
        except auto.CommandError as exc:
            raise EngineFailed(f"pulumi failed on stack {target.stack_name}:\n{_diagnostic(exc)}",
                               code="ENGINE_FAILED") from exc

    def _stack(self, target: StackTarget, tmp: Path | None = None) -> Any:
        from pulumi import automation as auto

        state = state_settings(self.home, self.environ)
        plugins = plugins_for(target, self.environ)
        program = pin_provider_versions(target.program(), overrides(self.environ))
        stack = auto.create_or_select_stack(
            stack_name=target.stack_name, project_name=PROJECT, program=program,
            opts=workspace_options(target, self.home, state, tmp),
        )
        for name, pinned in plugins.items():
            stack.workspace.install_plugin(name, pinned)
        return stack

    def _run(self, op: Operation, target: StackTarget, sink: ProgressSink | None,
             **kwargs: Any) -> RunResult:
        from pulumi import automation as auto

        findings: list[PolicyFinding] = []
        errors: list[str] = []  # the engine reports step failures as events, not on stderr

        def collect(event: ProgressEvent) -> None:
            if event.kind == "diagnostic" and event.severity == "error" and event.message:
                errors.append(event.message)
            if event.kind == "policy":
                findings.append(PolicyFinding(policy=event.name or "", urn=event.urn,
                                              enforcement=event.severity or "advisory",
                                              message=event.message or ""))
            if sink is not None:
                sink(event)

        with self._errors(target), private_tmp(self.home) as tmp:
            stack = self._stack(target, tmp)
            if op in ("up", "destroy"):
                self._settle_pending_creates(target, stack)
            try:
                result = run_with_events(
                    lambda on_event: getattr(stack, op)(
                        on_event=on_event, color="never", **kwargs
                    ),
                    collect,
                )
            except Exception as exc:
                # A mandatory policy violation fails the run: report it as findings.
                if any(f.enforcement == "mandatory" for f in findings):
                    return RunResult(engine="pulumi", operation=op, stack=target.stack_name,
                                     policy=findings, diff=getattr(exc, "stdout", "") or "")
                if errors and type(exc) is auto.CommandError:
                    raise EngineFailed(
                        f"pulumi failed on stack {target.stack_name}:\n"
                        + "\n".join(_engine_errors(errors)), code="ENGINE_FAILED") from exc
                raise
        return self._result(op, target, result, findings)

    @staticmethod
    def _settle_pending_creates(target: StackTarget, stack: Any) -> None:
        """A run killed mid-create leaves creates in flight that the state does not record.
        Kubernetes objects (the add-on stack) have fixed names and the provider applies them
        server-side, so the next update takes an object the killed run made over by name:
        dropping the record loses nothing. A VM is different: the engine would forget one
        the cloud did create and the reconciler would buy it again, so stop and say which
        resources to look up and import (or confirm absent)."""
        pending = pending_creates(stack.export_stack().deployment or {})
        if not pending:
            return
        if target.kind is StackKind.CLUSTER_ADDONS:
            stack.refresh(clear_pending_creates=True, color="never")
            return
        raise EngineFailed(
            f"stack {target.stack_name} has {len(pending)} create(s) left in flight by an "
            f"interrupted run: {', '.join(pending)}. Look each VM up by its anycloud.sh/"
            "attempt tag: import it if it exists (`pulumi import`), then clear the record "
            "with `pulumi refresh --clear-pending-creates` in "
            f"$ANYCLOUD_HOME/stacks/{target.stack_name}",
            code="PENDING_CREATES",
        )

    def _result(self, op: Operation, target: StackTarget, result: Any,
                findings: list[PolicyFinding]) -> RunResult:
        counts = getattr(result, "change_summary", None)
        if counts is None and getattr(result, "summary", None) is not None:
            counts = result.summary.resource_changes
        outputs = {k: ("[secret]" if v.secret else v.value)
                   for k, v in (getattr(result, "outputs", None) or {}).items()}
        return RunResult(engine="pulumi", operation=op, stack=target.stack_name,
                         summary=ChangeSummary.from_op_counts(counts or {}),
                         diff=getattr(result, "stdout", "") or "", outputs=outputs,
                         policy=findings)

    def preview(self, target: StackTarget, *, diff: bool = False,
                on_progress: ProgressSink | None = None) -> RunResult:
        return self._run("preview", target, on_progress, diff=diff,
                         policy_packs=[policy_pack()])

    def up(self, target: StackTarget, *, on_progress: ProgressSink | None = None) -> RunResult:
        return self._run("up", target, on_progress, policy_packs=[policy_pack()])

    def destroy(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        return self._run("destroy", target, on_progress)

    def refresh(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        return self._run("refresh", target, on_progress)

    def lookup_vms(self, target: StackTarget, attempt_ids: list[str]) -> dict[str, str]:
        """``running`` while the stack's state holds a VM tagged with the attempt, else
        ``absent``: the engine deletes a VM only once the provider confirmed it gone. One
        export of the stack answers for every attempt."""
        with self._errors(target):
            deployment = self._stack(target).export_stack().deployment or {}
        tagged: set[str] = set()
        for res in deployment.get("resources", []):
            if res.get("type") in VM_TYPES:
                props = {**(res.get("inputs") or {}), **(res.get("outputs") or {})}
                tagged.update((props.get("tags") or props.get("labels") or {}).values())
        return {a: "running" if a in tagged else "absent" for a in attempt_ids}

    def unlock(self, target: StackTarget) -> bool:
        """Clear a lock left by a killed run (``pulumi cancel``)."""
        with self._errors(target):
            self._stack(target).cancel()
        return True
