"""Rule ``no-public-ingress``: nothing reaches a pool VM except TCP 80 from Cloudflare's
ranges (AWS security groups and their rules, GCP firewalls, Azure NSGs and security rules).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import ReportViolation, ResourceValidationArgs

from policies import config as cfg
from policies.common import as_int, nonempty, report_at
from policies.wire import as_list, as_str_list, get, show

AWS_SECURITY_GROUP = "aws:ec2/securityGroup:SecurityGroup"
AWS_SECURITY_GROUP_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
AWS_VPC_INGRESS_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
GCP_FIREWALL = "gcp:compute/firewall:Firewall"
AZURE_NSG = "azure-native:network:NetworkSecurityGroup"
AZURE_SECURITY_RULE = "azure-native:network:SecurityRule"


class _LazyRanges:
    """Cloudflare ranges resolved on first use: a stack with no allow rule needs none."""

    def __init__(self, config: Mapping[str, Any]) -> None:
        self._config = config
        self._ranges: cfg.CloudflareRanges | None = None

    def contains(self, cidr: str) -> bool:
        if self._ranges is None:
            self._ranges = cfg.cloudflare_ranges(self._config)
        return self._ranges.contains(cidr)


def _source_problems(field: str, cidrs: list[str], ranges: _LazyRanges) -> list[str]:
    return [
        f"{field} {show(cidr)} is not within Cloudflare's published ranges"
        for cidr in cidrs
        if not ranges.contains(cidr)
    ]


def _aws_ingress_problems(rule: Any, ranges: _LazyRanges, protocol_key: str) -> list[str]:
    problems: list[str] = []
    protocol = str(get(rule, protocol_key) or "").lower()
    if protocol not in ("tcp", "6"):
        problems.append(f"{protocol_key}={show(protocol)} is not tcp")
    from_port, to_port = get(rule, "fromPort"), get(rule, "toPort")
    if as_int(from_port) != 80 or as_int(to_port) != 80:
        problems.append(f"fromPort={show(from_port)} toPort={show(to_port)} is not exactly port 80")
    for peer in (
        "securityGroups",
        "self",
        "prefixListIds",
        "sourceSecurityGroupId",
        "referencedSecurityGroupId",
        "prefixListId",
    ):
        value = get(rule, peer)
        if nonempty(value):
            problems.append(
                f"{peer}={show(value)} admits peers; only Cloudflare CIDRs may be sources"
            )
    for key in ("cidrBlocks", "ipv6CidrBlocks", "cidrIpv4", "cidrIpv6"):
        problems += _source_problems(key, as_str_list(get(rule, key)), ranges)
    return problems


def _gcp_firewall_problems(props: Any, ranges: _LazyRanges) -> list[str]:
    problems: list[str] = []
    for i, allow in enumerate(as_list(get(props, "allows"))):
        protocol = str(get(allow, "protocol") or "").lower()
        ports = as_str_list(get(allow, "ports"))
        if protocol not in ("tcp", "6"):
            problems.append(f"allows[{i}].protocol={show(protocol)} is not tcp")
        if not ports or any(p not in ("80", "80-80") for p in ports):
            problems.append(f"allows[{i}].ports={show(ports)} is not exactly ['80']")
    for peer in ("sourceTags", "sourceServiceAccounts"):
        value = as_str_list(get(props, peer))
        if value:
            problems.append(
                f"{peer}={show(value)} admits peers; only Cloudflare CIDRs may be sources"
            )
    source_ranges = as_str_list(get(props, "sourceRanges"))
    if not source_ranges and not problems:
        problems.append("sourceRanges is empty, which GCP treats as 0.0.0.0/0")
    problems += _source_problems("sourceRanges", source_ranges, ranges)
    return problems


def _azure_rule_problems(rule: Any, ranges: _LazyRanges) -> list[str]:
    # A missing direction/access is treated as the permissive value: fail closed.
    direction = str(get(rule, "direction") or "Inbound").lower()
    access = str(get(rule, "access") or "Allow").lower()
    if direction != "inbound" or access != "allow":
        return []
    problems: list[str] = []
    protocol = str(get(rule, "protocol") or "*")
    if protocol.lower() != "tcp":
        problems.append(f"protocol={show(protocol)} is not Tcp")
    ports = as_str_list(get(rule, "destinationPortRange")) + as_str_list(
        get(rule, "destinationPortRanges")
    )
    if not ports or any(p not in ("80", "80-80") for p in ports):
        problems.append(f"destinationPortRange(s)={show(ports)} is not exactly 80")
    asgs = get(rule, "sourceApplicationSecurityGroups")
    if nonempty(asgs):
        problems.append(
            "sourceApplicationSecurityGroups admits peers; only Cloudflare CIDRs may be sources"
        )
    sources = as_str_list(get(rule, "sourceAddressPrefix")) + as_str_list(
        get(rule, "sourceAddressPrefixes")
    )
    if not sources and not nonempty(asgs):
        sources = ["*"]
    problems += _source_problems("sourceAddressPrefix(es)", sources, ranges)
    return problems


def no_public_ingress(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
    """Rule 1: nothing reaches a pool VM except TCP 80 from Cloudflare's ranges."""
    props, rtype = args.props, args.resource_type
    ranges = _LazyRanges(args.get_config())
    found: list[tuple[str, list[str]]] = []
    if rtype == AWS_SECURITY_GROUP:
        for i, rule in enumerate(as_list(get(props, "ingress"))):
            found.append((f"ingress[{i}]", _aws_ingress_problems(rule, ranges, "protocol")))
    elif rtype == AWS_SECURITY_GROUP_RULE:
        if str(get(props, "type") or "").lower() == "ingress":
            found.append(("type='ingress'", _aws_ingress_problems(props, ranges, "protocol")))
    elif rtype == AWS_VPC_INGRESS_RULE:
        found.append(("ingress rule", _aws_ingress_problems(props, ranges, "ipProtocol")))
    elif rtype == GCP_FIREWALL:
        direction = str(get(props, "direction") or "INGRESS").upper()
        if direction == "INGRESS" and as_list(get(props, "allows")):
            found.append(("direction='INGRESS' allows", _gcp_firewall_problems(props, ranges)))
    elif rtype == AZURE_NSG:
        for i, rule in enumerate(as_list(get(props, "securityRules"))):
            name = get(rule, "name") or i
            found.append((f"securityRules[{show(name)}]", _azure_rule_problems(rule, ranges)))
    elif rtype == AZURE_SECURITY_RULE:
        found.append(("Inbound Allow rule", _azure_rule_problems(props, ranges)))
    for where, problems in found:
        if problems:
            report_at(
                args,
                report_violation,
                f"{rtype} {where}: {'; '.join(problems)}. Pool VMs admit only TCP 80 from "
                "Cloudflare's ranges (a deny rule is always fine).",
            )
