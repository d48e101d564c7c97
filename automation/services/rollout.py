"""Plan, preview and policy check of node-pool stacks: what CI runs before any rollout."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from automation.engine.mock_runner import MockEngineRunner
from automation.engine.runner import PolicyFinding, ProgressSink, RunResult, StackRunner
from automation.services.context import App
from automation.services.stacks import live_pool_ids, pool_target


class PlannedResource(BaseModel):
    urn: str
    type: str
    name: str
    parent: str | None
    inputs: dict[str, Any]  # wire names; secrets as "[secret]"


class Plan(BaseModel):
    engine: str = "mock"
    pool: str
    stack: str
    resources: list[PlannedResource]


class PolicyReport(BaseModel):
    pool: str
    stack: str
    engine: str = "mock"
    findings: list[PolicyFinding]

    @property
    def mandatory(self) -> list[PolicyFinding]:
        return [f for f in self.findings if f.enforcement == "mandatory"]


def plan_pool(app: App, ref: str) -> Plan:
    """The pool's stack program evaluated under the mock engine: no CLI, no cloud."""
    target = pool_target(app, ref)
    run = MockEngineRunner(app.home).evaluate(target, reveal_secrets=False)
    return Plan(pool=target.key, stack=target.stack_name, resources=[
        PlannedResource(urn=r.urn, type=r.type, name=r.name, parent=r.parent, inputs=r.inputs)
        for r in run.resources
    ])


def preview_pool(app: App, runner: StackRunner, ref: str, *, diff: bool = False,
                 on_progress: ProgressSink | None = None) -> RunResult:
    return runner.preview(pool_target(app, ref), diff=diff, on_progress=on_progress)


def check_pool_policy(app: App, ref: str) -> PolicyReport:
    """The policy pack over the resources the stack program registers (offline)."""
    target = pool_target(app, ref)
    runner = MockEngineRunner(app.home)
    # Secrets are readable here so the rules can check user data; no value reaches a message.
    run = runner.evaluate(target, reveal_secrets=True)
    return PolicyReport(pool=target.key, stack=target.stack_name,
                        findings=runner.check_policy(run))


def all_pools(app: App) -> list[str]:
    return live_pool_ids(app)
