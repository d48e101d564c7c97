"""The policy pack the engine runs (`--policy-pack policies/`). Constructing it blocks."""

import sys
from pathlib import Path

# The engine runs this file by path, which puts policies/ itself on sys.path (its modules
# would shadow same-named top-level ones); import the package from its parent instead.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policies.orphan import exit_with_the_engine  # noqa: E402
from policies.rules import build_policies  # noqa: E402

exit_with_the_engine()
PolicyPack(
    name="anycloud-node-pool",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=build_policies(),
)
