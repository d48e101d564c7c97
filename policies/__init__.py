"""anycloud's policy pack: the rules that gate every node-pool rollout.

Layout: the pure validate functions live by concern: ``network.py`` (no public ingress),
``vm_baseline.py`` (SSH keys, cloud credentials, IMDSv2, VM types, the per-pool guardrails),
``join_script.py`` (k3s checksum, pool labels and taint), ``kubernetes_objects.py``
(DaemonSet digests, GPU requests, bootstrap tokens), ``cost_allocation.py`` (cost tags);
``common.py`` holds the VM kinds, the clock and tiny helpers they share. ``rules.py`` is the
registry: ``build_policies`` lists every rule from that one place, for both
``offline.check_resources`` (runs those same Policy objects without the engine) and
``__main__.py``, which only constructs the ``PolicyPack`` (that blocks serving gRPC): never
import it. ``config.py`` (names, levels, schemas, data-file defaults), ``naming.py`` (tag/label
key spellings per cloud), ``userdata.py`` (user-data scanning), ``wire.py`` (reading props).
This package depends on nothing else of anycloud's.

Offline entry point::

    check_resources(resources, config=None, *, clock=utc_now) -> list[Violation]

``resources``: ``{"urn", "type", "name", "inputs" (wire names), "secret_keys": [...]}``;
``secretInputs`` and ``options.additionalSecretOutputs`` (the mock engine's record shape)
and ``additional_secret_outputs`` are read too. ``config``: the ``--policy-pack-config``
JSON shape, ``{"all": level, "<policy>": level | {"enforcementLevel": level, key: value}}``.
``Violation(policy, enforcement_level, urn, message, verified=True)``; ``urn`` is None for a
stack-wide finding; ``verified=False`` (always advisory) when a rule could not read an input.

Config keys per policy (defaults):

- ``no-public-ingress``: ``cloudflareIpv4``, ``cloudflareIpv6`` (data/cloudflare.toml).
- ``no-ssh-key``: ``azureAdminPasswordAllowed`` (true: Azure needs a password or a key, so an
  Azure admin password is accepted only if the user data turns password SSH off; false
  refuses any).
- ``vm-type-x86-64``: ``allowedVmTypes`` ``{aws|gcp|azure: [types]}`` (x86_64 entries of
  data/catalog.sqlite; a data/catalog.toml beside it overrides).
- ``bootstrap-token-ttl-and-secret``: ``maxTokenTtlMinutes`` (60).
- ``gpu-workload-requests``: ``gpuPools`` ``{pool id: GPUs per Node}`` ({}: every pool is CPU).
- ``guardrail-vms-per-pool``: ``maxVmsPerPool`` (20). ``guardrail-gpus-per-pool``:
  ``maxGpusPerPool`` (32), ``gpuPools`` (else the catalog's GPU count per VM type).

``cost-allocation-tags`` (no config) checks every tag or label field of each billable
resource type (``policies.cost_allocation.BILLABLE``).

Every rule is mandatory by default except the two guardrails (advisory). A needed setting
missing from both config and data files raises ``PolicyConfigError`` naming the key and file.

Secrets and unknowns:

- Real engine: the SDK's ``Analyze`` strips the secret marker, so rules see secret inputs
  (user data, token data) in plaintext; messages never echo them. Secret-ness is therefore
  read from ``opts.additional_secret_outputs`` (what makes the state encrypt a property).
  A value unknown during preview raises when read; each rule runs its sub-checks separately
  so readable fields still report, then re-raises, and the SDK turns that into an advisory
  "can't run policy during preview" note. At ``up`` every input is known and the check is
  enforced.
- Offline: ``"[secret]"`` and ``"[unknown]"`` placeholders cannot be judged; the rule reports
  ``verified=False`` at advisory level. Run the mock engine with plaintext secrets (listed in
  ``secret_keys``) to have them checked; they never reach a message.
"""

from policies.config import PolicyConfigError
from policies.offline import Violation, check_resources

__all__ = ["PolicyConfigError", "Violation", "check_resources"]
