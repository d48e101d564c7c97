"""How long the offline policy check takes per stack size (prints a table; asserts nothing).

    .venv/bin/python benchmarks/bench_policy_rules.py [sizes...] [--smoke]
        (sizes in VMs; 1 10 100 500 by default)

--smoke: sizes 1 and 2.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli

SHA = "0123456789abcdef" * 4
CONFIG: dict[str, Any] = {
    # Explicit, so the figures do not depend on the data files.
    "no-public-ingress": {"cloudflareIpv4": ["173.245.48.0/20"], "cloudflareIpv6": []},
    "vm-type-x86-64": {"allowedVmTypes": {"aws": ["m7i.large"]}},
}


def _vm(i: int) -> dict[str, Any]:
    user_data = (
        "#!/bin/sh\nset -eu\n"
        f"expected={SHA}\ntmp=$(mktemp)\n"
        'curl -fsSL -o "$tmp" https://github.com/k3s-io/k3s/releases/download/v1.35.5%2Bk3s1/k3s\n'
        'echo "$expected  $tmp" | sha256sum -c -\ninstall -m 0755 "$tmp" /usr/local/bin/k3s\n'
        f"k3s agent --node-label anycloud.sh/cluster=c1 --node-label anycloud.sh/node-pool=p1 "
        f"--node-label anycloud.sh/provider=aws --node-label anycloud.sh/attempt=a{i} "
        "--node-taint anycloud.sh/node-pool=p1:NoSchedule\n"
    )
    return {
        "urn": f"urn:pulumi:bench::anycloud::aws:ec2/instance:Instance::vm-{i}",
        "type": "aws:ec2/instance:Instance",
        "name": f"vm-{i}",
        "inputs": {
            "instanceType": "m7i.large",
            "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1},
            "userData": user_data,
            "tags": {
                "anycloud.sh/cluster": "c1",
                "anycloud.sh/node-pool": "p1",
                "anycloud.sh/attempt": f"a{i}",
            },
        },
        "secret_keys": ["userData"],
    }


def main() -> None:
    def options(p: argparse.ArgumentParser) -> None:
        p.add_argument("sizes", nargs="*", type=int, default=[1, 10, 100, 500],
                       help="VMs in the stack, one line each")

    args = _cli.parse(__doc__, options=options)
    sizes = [1, 2] if args.smoke else args.sizes
    from policies import check_resources

    print(f"{'VMs':>6} {'findings':>10} {'seconds':>9} {'ms/VM':>7}")
    for size in sizes:
        resources = [_vm(i) for i in range(size)]
        start = time.perf_counter()
        found = check_resources(resources, CONFIG)
        elapsed = time.perf_counter() - start
        print(f"{size:>6} {len(found):>10} {elapsed:>9.3f} {1000 * elapsed / size:>7.2f}")


if __name__ == "__main__":
    main()
