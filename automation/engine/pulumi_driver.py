"""The Automation API adapter: the only module that needs the ``pulumi`` CLI.

One LocalWorkspace per stack with a persistent work dir under ``$ANYCLOUD_HOME/stacks``
(a temporary dir per call would lose the stack's passphrase salt), the inline program from
``stacks/``, project ``anycloud``. Events stream through a queue to the caller's sink.
Never switches Pulumi's checkpoints off: crash recovery needs the record of in-flight steps.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Literal

from automation import instruments
from automation.engine.errors import (
    EngineFailed,
    EngineMissing,
    PluginMissing,
    StackLocked,
    StackMissing,
)
from automation.engine.events import run_with_events
from automation.engine.plugins import overrides, pin_provider_versions, plugin_version
from automation.engine.pulumi_cli import command, install_plugins
from automation.engine.recovery import (
    VM_PLUGINS,
    Answer,
    PendingCreate,
    Settlement,
    adopted,
    answers_from_outputs,
    cloud_lookup_program,
    gcp_project,
    has_unknowns,
    pending_creates_in,
    read_each,
    read_program,
    recorded_ids,
    settle,
    unknown_paths,
    unread_imports,
    with_imports,
)
from automation.engine.runner import (
    ChangeSummary,
    DriftChange,
    Operation,
    PolicyFinding,
    ProgressEvent,
    ProgressSink,
    RunResult,
    StackKind,
    StackTarget,
)
from automation.engine.secrets import StateSettings, state_settings
from automation.engine.stale_locks import remove_stale_locks

PROJECT = "anycloud"
_log = logging.getLogger(__name__)
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
                      tmp: Path | None = None, pulumi_command: Any = None,
                      engine_env: dict[str, str] | None = None) -> Any:
    from pulumi import automation as auto

    work_dir = home / "stacks" / target.stack_name
    work_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    # The policy pack runs as its own python program: give it this interpreter, which has
    # pulumi-policy and the rules installed.
    # A sealed credential's secret rides in the environment of this engine process only
    # (target.secret_env): the provider plugin reads it; it never reaches a file or state.
    env = {**(engine_env or {}), **state.env, **target.secret_env,
           "PULUMI_PYTHON_CMD": sys.executable}
    if tmp is not None:
        env["TMPDIR"] = str(tmp)
    return auto.LocalWorkspaceOptions(
        work_dir=str(work_dir),
        project_settings=auto.ProjectSettings(
            name=PROJECT, runtime="python", backend=auto.ProjectBackend(url=state.backend_url)
        ),
        secrets_provider=state.secrets_provider,
        env_vars=env,
        pulumi_command=pulumi_command,  # None: the SDK checks the CLI's version itself
    )


def pending_creates(deployment: dict[str, Any]) -> list[str]:
    """URNs of creates an interrupted run left in flight (``pending_operations``)."""
    return sorted(op.get("resource", {}).get("urn", "?")
                  for op in deployment.get("pending_operations") or []
                  if op.get("type") == "creating")


def _diagnostic(err: Exception) -> str:
    """The tail of the engine's stderr (CommandError keeps only its rendered text), or what
    its exit says when it wrote none (a ``pulumi`` killed by a signal says nothing)."""
    text = str(err)
    stderr = text.split(" stderr: ", 1)[1] if " stderr: " in text else text
    lines = [ln for ln in stderr.splitlines() if ln.strip()]
    if lines:
        return "\n".join(lines[-12:])
    found = re.search(r"code: (-?\d+)", text)
    code = int(found.group(1)) if found else None
    if code is not None and code < 0:
        return (f"the pulumi process was killed by signal {-code} before it said why; "
                "what it left in flight is settled on the next run")
    return f"the pulumi process exited (code {code}) and wrote nothing to stderr"


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

    def __init__(self, home: Path, *, environ: dict[str, str] | None = None,
                 engine_env: dict[str, str] | None = None,
                 kubeconfig: str | None = None, cloud_label: str | None = None) -> None:
        """``engine_env``: more environment for the engine and its plugins (where a stand-in
        plugin finds the simulated cloud); it also counts as part of ``environ``.
        ``kubeconfig``: the API server every stack's kubernetes provider writes to, whatever
        its cluster's registration names (``--simulate --engine pulumi``: the local API
        server that stands for the simulated cluster's). ``cloud_label``: who answers the
        cloud calls when a stand-in plugin does (``stand-in cloud``): what is recorded and
        shown of the runs then says nothing was bought (``models.recorded_engine``)."""
        self.home = home
        self.engine_env = dict(engine_env or {})
        self.environ = {**(os.environ if environ is None else environ), **self.engine_env}
        self.kubeconfig = kubeconfig
        self.cloud_label = cloud_label

    def _as_run(self, target: StackTarget) -> StackTarget:
        """``target`` as the engine runs it: its cluster's kubeconfig replaced by
        ``self.kubeconfig`` when one is given."""
        cluster = getattr(target.config, "cluster", None)
        if self.kubeconfig is None or cluster is None:
            return target
        cluster = cluster.model_copy(update={"kubeconfig_path": self.kubeconfig,
                                             "kube_context": None})
        return target.model_copy(
            update={"config": target.config.model_copy(update={"cluster": cluster})})

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
            # A pool's own stack and its ingress release are both unlocked by the pool.
            hint = (f"anycloud cluster unlock {target.key}"
                    if target.kind is StackKind.CLUSTER_ADDONS
                    else f"anycloud node-pool unlock {target.key}")
            raise StackLocked(target.stack_name, hint, _diagnostic(exc)) from exc
        except auto.StackNotFoundError as exc:
            raise StackMissing(target.stack_name) from exc
        except auto.CommandError as exc:
            raise EngineFailed(f"pulumi failed on stack {target.stack_name}:\n{_diagnostic(exc)}",
                               code="ENGINE_FAILED") from exc

    def _stack(self, target: StackTarget, tmp: Path | None = None) -> Any:
        stack = self._open(target.stack_name, self._as_run(target).program(), target, tmp)
        install_plugins(stack.workspace, plugins_for(target, self.environ))
        return stack

    def _open(self, stack_name: str, program: Any, target: StackTarget,
              tmp: Path | None) -> Any:
        """Create or select ``stack_name`` in the target's workspace with ``program`` (the
        CLI's version checked once per process, ``pulumi_cli.command``)."""
        from pulumi import automation as auto

        state = state_settings(self.home, self.environ)
        for lock in remove_stale_locks(state.backend_url, PROJECT, stack_name):
            _log.warning("removed the lock of a pulumi run that no longer exists: %s", lock)
        opts = workspace_options(target, self.home, state, tmp,
                                 pulumi_command=command(), engine_env=self.engine_env)
        return auto.create_or_select_stack(
            stack_name=stack_name, project_name=PROJECT,
            program=pin_provider_versions(program, overrides(self.environ)), opts=opts)

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
            if "policy_packs" in kwargs and target.policy_config:
                config_file = tmp / "policy-pack-config.json"
                config_file.write_text(json.dumps(target.policy_config))
                kwargs["policy_pack_configs"] = [str(config_file)]
            if op in ("up", "destroy"):
                exported = self._check_expected(target, stack)
                self._settle_pending_creates(target, stack, tmp, collect, exported)
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

    def _check_expected(self, target: StackTarget, stack: Any) -> Any:
        """Refuse to act on a state that lost what the ledger saw it hold
        (``automation.engine.expectation``); the export it read, for the recovery to reuse
        (None when there was nothing to compare)."""
        from automation.engine import expectation

        expect = target.expect
        if not expect.applied and not expect.attempts and not expect.started:
            return None  # nothing to compare: spare the export
        exported = stack.export_stack()
        deployment = exported.deployment or {}
        held = [*(r for r in deployment.get("resources") or []
                  if not str(r.get("type", "")).startswith(("pulumi:pulumi:Stack",
                                                            "pulumi:providers:"))),
                *(op.get("resource") or {} for op in deployment.get("pending_operations") or [])]
        backend = state_settings(self.home, self.environ).backend_url
        # A stack that was ever updated holds its root resource, even after a failed update.
        expectation.check(target, held, f"Pulumi backend {backend.split('?')[0]}",
                          exists=bool(deployment.get("resources")))
        return exported

    def _settle_pending_creates(self, target: StackTarget, stack: Any, tmp: Path | None,
                                sink: ProgressSink | None = None,
                                exported: Any = None) -> Settlement | None:
        """A run killed mid-create leaves creates in flight that the state does not record
        (``automation.engine.recovery``): look each up through the provider by what
        identifies it; once every one is found or confirmed absent, import those found
        (one ``stack import`` of the state with them added under the provider's ids and no
        create left in flight, then a refresh of them reads their outputs). Otherwise stop
        with ``PENDING_CREATES`` naming what is unresolved, having changed nothing."""
        deployment = exported if exported is not None else stack.export_stack()
        pending = pending_creates_in(deployment.deployment or {})
        if not pending:
            # A recovery killed between its import and its refresh left resources recorded
            # without their outputs: read them now, before anything uses those outputs.
            unread = unread_imports(deployment.deployment or {})
            if unread:
                stack.refresh(target=unread, color="never")
            return None
        resources = (deployment.deployment or {}).get("resources") or []
        recorded = {str(r.get("urn")) for r in resources}
        outcome = self._settle(target, pending, recorded, tmp, recorded_ids(resources))
        if not outcome.complete:
            raise EngineFailed(
                f"stack {target.stack_name} has {len(pending)} create(s) left in flight by an "
                f"interrupted run, and not all could be settled: {outcome.describe()}. "
                "Nothing was changed. Look each unresolved resource up in the cloud: import "
                "it if it exists (`pulumi import`), then clear the record with `pulumi "
                f"refresh --clear-pending-creates` in $ANYCLOUD_HOME/stacks/{target.stack_name}",
                code="PENDING_CREATES",
            )
        deployment.deployment = adopted(deployment.deployment or {}, outcome)
        stack.import_stack(deployment)
        if outcome.imported:
            stack.refresh(target=[urn for urn, _ in outcome.imported], color="never")
        if sink is not None:
            sink(ProgressEvent(kind="diagnostic", severity="info",
                               message=f"crash recovery on {target.stack_name}: "
                                       f"{outcome.describe()}"))
        return outcome

    def _settle(self, target: StackTarget, pending: list[PendingCreate], recorded: set[str],
                tmp: Path | None,
                ids: Mapping[str, Sequence[str]] | None = None) -> Settlement:
        """``recovery.settle`` with this engine's lookups, through the target's providers."""
        return settle(pending, recorded,
                      lookup_cloud=lambda some: self._lookup_cloud(target, some, tmp),
                      lookup_objects=lambda items: self._lookup_objects(target, items, tmp),
                      project=gcp_project(target.config), recorded_ids=ids)

    def _run_lookup(self, target: StackTarget, program: Any, plugins: dict[str, str],
                    tmp: Path | None) -> dict[str, Any]:
        """Run a lookup program (reads and invokes only) on a scratch stack beside the
        target's, with the plugins it needs; return its outputs. The scratch stack is
        removed afterwards (reads leave the objects they read alone)."""
        from pulumi import automation as auto

        scratch = f"{target.stack_name}-lookup"
        stack = self._open(scratch, program, target, tmp)
        try:
            install_plugins(stack.workspace, plugins)
            result = stack.up(color="never")
        finally:
            with suppress(auto.CommandError):
                stack.workspace.remove_stack(scratch, force=True)
        return {k: v.value for k, v in (result.outputs or {}).items()}

    def _lookup_cloud(self, target: StackTarget, pending: list[PendingCreate],
                      tmp: Path | None) -> dict[str, Answer]:
        """``cloud_lookup_program`` with the pool's provider and its cloud's plugin. Without
        the plugin this fails, naming it: nothing is guessed."""
        from pulumi import automation as auto

        if target.kind is not StackKind.NODE_POOL:
            return {p.urn: Answer("unknown", detail="only a node-pool stack has cloud "
                                                    "resources") for p in pending}
        from stacks.providers import cloud_provider

        plugins = self._cloud_plugins(pending)
        program = cloud_lookup_program(pending, lambda: cloud_provider(target.config))
        try:
            outputs = self._run_lookup(target, program, plugins, tmp)
        except (auto.CommandError, PluginMissing) as exc:
            needs = ", ".join(f"pulumi-resource-{n} {v}" for n, v in plugins.items())
            raise EngineFailed(
                f"stack {target.stack_name} has {len(pending)} cloud create(s) left in flight "
                f"by an interrupted run ({', '.join(p.urn for p in pending)}); looking them "
                f"up (a VM by its anycloud.sh/attempt tag, a network resource by its tags or "
                f"name) runs the provider's own lookups, which need the {needs} plugin, and "
                f"the engine could not run it:\n{_diagnostic(exc)}\n"
                "Nothing was imported or cleared.",
                code="PENDING_CREATES",
            ) from exc
        return answers_from_outputs(outputs, pending)

    def _cloud_plugins(self, pending: list[PendingCreate]) -> dict[str, str]:
        return {VM_PLUGINS[c]: "v" + plugin_version(VM_PLUGINS[c], self.environ)
                for c in sorted({p.cloud for p in pending if p.cloud})}

    def _lookup_objects(self, target: StackTarget, items: list[tuple[PendingCreate, str]],
                        tmp: Path | None) -> dict[str, Answer]:
        """``read_program`` by id: Kubernetes objects through the cluster's provider, GCP
        network resources through the pool's (``read_each``)."""
        from pulumi import automation as auto

        kube = [(p, rid) for p, rid in items if p.kind == "kubernetes"]
        cloud = [(p, rid) for p, rid in items if p.kind != "kubernetes"]
        answers: dict[str, Answer] = {}
        cluster = getattr(self._as_run(target).config, "cluster", None)
        if kube and cluster is None:
            answers.update({p.urn: Answer("unknown", detail="the stack names no cluster")
                            for p, _ in kube})
        elif kube and cluster is not None:
            from stacks.providers import kube_provider

            kube_cluster = cluster
            # Every stack's plugins include kubernetes: ``_stack`` has just installed it.
            answers.update(read_each(kube, lambda some: self._run_lookup(
                target, read_program(some, lambda: kube_provider(kube_cluster)), {}, tmp),
                auto.CommandError, _diagnostic))
        if cloud and target.kind is not StackKind.NODE_POOL:
            answers.update({p.urn: Answer("unknown", detail="only a node-pool stack has "
                                                            "cloud resources") for p, _ in cloud})
        elif cloud:
            from stacks.providers import cloud_provider

            plugins = self._cloud_plugins([p for p, _ in cloud])
            answers.update(read_each(cloud, lambda some: self._run_lookup(
                target, read_program(some, lambda: cloud_provider(target.config)), plugins,
                tmp), auto.CommandError, _diagnostic))
        return answers

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

    @instruments.stack_operation
    def preview(self, target: StackTarget, *, diff: bool = False,
                on_progress: ProgressSink | None = None) -> RunResult:
        return self._run("preview", target, on_progress, diff=diff,
                         policy_packs=[policy_pack()])

    @instruments.stack_operation
    def up(self, target: StackTarget, *, on_progress: ProgressSink | None = None) -> RunResult:
        return self._run("up", target, on_progress, policy_packs=[policy_pack()])

    @instruments.stack_operation
    def destroy(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        return self._run("destroy", target, on_progress)

    @instruments.stack_operation
    def refresh(self, target: StackTarget, *,
                on_progress: ProgressSink | None = None) -> RunResult:
        return self._run("refresh", target, on_progress)

    @instruments.stack_operation
    def adopt(self, target: StackTarget, *,
              on_progress: ProgressSink | None = None) -> RunResult:
        """Rebuild a lost state from what the cloud holds, buying nothing (``pulumi
        import`` semantics). A preview lists every resource the program would create over
        the state as it is; each is looked up as crash recovery looks up a create left in
        flight (``recovery.settle``: a VM by its attempt tag, a network resource by its
        tags or name, a Kubernetes object by kind and name). The resources that live only
        in the state (components, providers, ``random:`` values) are made by an ``up``
        targeting them alone, then the found ones are recorded under the provider's ids by
        ``stack import`` and refreshed, in rounds (``_adopt_rounds``). What is absent is
        left out: the next ``up`` creates it. When any lookup cannot tell,
        ``ADOPT_FAILED`` names it and the state is put back as it was."""
        with self._errors(target), private_tmp(self.home) as tmp:
            stack = self._stack(target, tmp)
            self._settle_pending_creates(target, stack, tmp, on_progress)
            before = stack.export_stack()
            changed: list[str] = []  # what a round did to the state so far
            try:
                outcome = self._adopt_rounds(target, stack, tmp, changed)
            except EngineFailed:
                if changed:
                    stack.import_stack(before)  # nothing changed: the state as it was
                raise
        summary = ChangeSummary(same=len(outcome.imported), create=len(outcome.cleared))
        if on_progress is not None:
            on_progress(ProgressEvent(kind="diagnostic", severity="info", message=(
                f"adopted {len(outcome.imported)} resource(s) the cloud holds into "
                f"{target.stack_name}; {len(outcome.cleared)} not found (the next up creates "
                "them)")))
        return RunResult(engine="pulumi", operation="adopt", stack=target.stack_name,
                         summary=summary, diff=outcome.describe())

    def _adopt_rounds(self, target: StackTarget, stack: Any, tmp: Path,
                      changed: list[str]) -> Settlement:
        """Look up and import in rounds: a planned create whose inputs the preview cannot
        know yet (a route-table association names a subnet and a table that are themselves
        being looked up) waits until what it names is imported, and the next preview knows
        it. One still unknown once a round imports nothing more, or any lookup that cannot
        tell, stops the adopt (``ADOPT_FAILED``); the caller then restores the state. The
        resources that live only in the state are made in the first round (they are in the
        state, no longer planned, in the next)."""
        total = Settlement()
        settled: set[str] = set()
        while True:
            planned = [p for p in self._planned_creates(stack) if p.urn not in settled]
            state_only = [p for p in planned if p.kind == "state-only"]
            ready = [p for p in planned if p.kind != "state-only" and not has_unknowns(p.inputs)]
            waiting = [p for p in planned if p.kind != "state-only" and has_unknowns(p.inputs)]
            recorded = {str(r.get("urn")) for r in
                        (stack.export_stack().deployment or {}).get("resources") or []}
            outcome = self._settle(target, ready, recorded | {p.urn for p in state_only}, tmp)
            if not outcome.complete:
                raise EngineFailed(
                    f"cannot adopt {target.stack_name}: not every resource of it could be "
                    f"looked up, and importing only some would have the next update buy the "
                    f"rest again: {outcome.describe()}. Nothing was changed.",
                    code="ADOPT_FAILED")
            if state_only:
                changed.append("up")
                stack.up(target=[p.urn for p in state_only], color="never")
            if outcome.imported:
                changed.append("import")
                exported = stack.export_stack()
                exported.deployment = with_imports(exported.deployment or {}, ready, outcome)
                stack.import_stack(exported)
                stack.refresh(target=[urn for urn, _ in outcome.imported], color="never")
            total.imported += outcome.imported
            total.cleared += outcome.cleared
            settled |= {p.urn for p in ready}
            if not waiting:
                return total
            if not outcome.imported:  # nothing more will become known: a guess either way
                raise EngineFailed(
                    f"cannot adopt {target.stack_name}: "
                    + "; ".join(f"{p.urn} cannot be looked up: its inputs "
                                f"{', '.join(unknown_paths(p.inputs))} stay unknown"
                                for p in waiting) + ". Nothing was changed.",
                    code="ADOPT_FAILED")

    @staticmethod
    def _planned_creates(stack: Any) -> list[PendingCreate]:
        """The creates a preview (no policy packs: nothing is applied) plans over the
        stack's state as it is: on a lost state, every resource of the program."""
        planned: dict[str, PendingCreate] = {}

        def collect(event: Any) -> None:
            step = event.resource_pre_event
            if step is None or step.metadata.new is None:
                return
            if str(getattr(step.metadata.op, "value", step.metadata.op)) == "create":
                p = PendingCreate.from_step(step.metadata.new)
                planned[p.urn] = p

        stack.preview(on_event=collect, color="never")
        return [planned[urn] for urn in sorted(planned)]

    @instruments.stack_operation
    def check_drift(self, target: StackTarget) -> list[DriftChange]:
        """``pulumi refresh --preview-only``: the provider reads every resource and the
        engine reports what a refresh would change in the state, writing nothing. Each
        resource whose refresh is an update (changed outside anycloud) or a delete (gone) is
        one change, named with its detailed diff's property paths (never values)."""
        changes: dict[str, DriftChange] = {}

        def collect(event: Any) -> None:
            # The refresh's result per resource arrives with its outputs (op same, update
            # or delete); the step's start says only "refresh".
            done = event.res_outputs_event
            if done is None:
                return
            m = done.metadata
            op = str(getattr(m.op, "value", m.op))
            kind: Literal["update", "delete"]
            if op == "update":
                kind = "update"
            elif op == "delete":
                kind = "delete"
            else:
                return
            names = sorted((m.detailed_diff or {}).keys()) or sorted(m.diffs or [])
            changes[m.urn] = DriftChange(urn=m.urn, type=m.type, name=m.urn.rsplit("::", 1)[-1],
                                         op=kind, properties=[str(n) for n in names])

        with self._errors(target), private_tmp(self.home) as tmp:
            stack = self._stack(target, tmp)
            # A lost state holds nothing to differ: "no drift" would be a claim nobody checked.
            self._check_expected(target, stack)
            stack.preview_refresh(on_event=collect, color="never")
        return [changes[urn] for urn in sorted(changes)]

    def lookup_vms(self, target: StackTarget, attempt_ids: list[str]) -> dict[str, str]:
        """``running`` while the stack's state holds a VM tagged with the attempt, else
        ``absent``: the engine deletes a VM only once the provider confirmed it gone. One
        export of the stack answers for every attempt. A state that lost what the ledger saw
        it hold witnesses nothing (its VMs would all read absent, and their releases be
        confirmed with the VMs still running): ``uncertain``."""
        from automation.engine.expectation import StateMissing

        with self._errors(target):
            stack = self._stack(target)
            try:
                exported = self._check_expected(target, stack)
            except StateMissing:
                return dict.fromkeys(attempt_ids, "uncertain")
            deployment = (exported or stack.export_stack()).deployment or {}
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
