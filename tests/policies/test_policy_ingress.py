"""Rule 1: no ingress to pool VMs except TCP 80 from Cloudflare's ranges."""

from __future__ import annotations

import ipaddress
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policies import PolicyConfigError
from policies.config import NO_PUBLIC_INGRESS as P

SG = "aws:ec2/securityGroup:SecurityGroup"
SG_RULE = "aws:ec2/securityGroupRule:SecurityGroupRule"
VPC_RULE = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
FIREWALL = "gcp:compute/firewall:Firewall"
NSG = "azure-native:network:NetworkSecurityGroup"
AZ_RULE = "azure-native:network:SecurityRule"


def cf_ingress(**over: Any) -> dict[str, Any]:
    rule = {"protocol": "tcp", "fromPort": 80, "toPort": 80, "cidrBlocks": ["173.245.48.0/20"]}
    rule.update(over)
    return rule


# --- AWS ---------------------------------------------------------------------------------------


def test_aws_inline_cloudflare_port_80_passes(s: SimpleNamespace) -> None:
    sg = {
        "ingress": [cf_ingress(), cf_ingress(cidrBlocks=[], ipv6CidrBlocks=["2400:cb00::/32"])],
        "egress": [{"protocol": "-1", "fromPort": 0, "toPort": 0, "cidrBlocks": ["0.0.0.0/0"]}],
    }
    assert s.check(P, SG, sg) == []


def test_aws_narrower_cloudflare_subnet_passes(s: SimpleNamespace) -> None:
    assert s.check(P, SG, {"ingress": [cf_ingress(cidrBlocks=["173.245.49.0/24"])]}) == []


@pytest.mark.parametrize(
    ("over", "expect"),
    [
        ({"cidrBlocks": ["0.0.0.0/0"]}, "'0.0.0.0/0' is not within Cloudflare"),
        ({"cidrBlocks": ["173.245.48.0/19"]}, "'173.245.48.0/19' is not within"),  # wider
        ({"fromPort": 22, "toPort": 22}, "fromPort=22 toPort=22 is not exactly port 80"),
        ({"fromPort": 80, "toPort": 443}, "is not exactly port 80"),
        ({"protocol": "-1", "fromPort": 0, "toPort": 0}, "protocol='-1' is not tcp"),
        ({"protocol": "udp"}, "protocol='udp' is not tcp"),
        ({"securityGroups": ["sg-123"]}, "securityGroups=['sg-123'] admits peers"),
        ({"self": True}, "self=True admits peers"),
        ({"ipv6CidrBlocks": ["::/0"]}, "'::/0' is not within"),
    ],
)
def test_aws_inline_violations(s: SimpleNamespace, over: dict[str, Any], expect: str) -> None:
    found = s.check(P, SG, {"ingress": [cf_ingress(**over)]})
    assert len(found) == 1
    assert expect in found[0].message
    assert "ingress[0]" in found[0].message
    assert found[0].enforcement_level == "mandatory"


def test_aws_security_group_rule_ingress_and_egress(s: SimpleNamespace) -> None:
    bad = {
        "type": "ingress",
        "protocol": "tcp",
        "fromPort": 22,
        "toPort": 22,
        "cidrBlocks": ["10.0.0.0/8"],
        "securityGroupId": "sg-1",
    }
    assert len(s.check(P, SG_RULE, bad)) == 1
    assert s.check(P, SG_RULE, {**bad, "type": "egress"}) == []
    good = {"type": "ingress", **cf_ingress(), "securityGroupId": "sg-1"}
    assert s.check(P, SG_RULE, good) == []
    peer = {**good, "cidrBlocks": [], "sourceSecurityGroupId": "sg-2"}
    assert "sourceSecurityGroupId='sg-2' admits peers" in s.check(P, SG_RULE, peer)[0].message


def test_aws_vpc_ingress_rule(s: SimpleNamespace) -> None:
    good = {"ipProtocol": "tcp", "fromPort": 80, "toPort": 80, "cidrIpv4": "103.21.244.0/22"}
    assert s.check(P, VPC_RULE, good) == []
    assert "'0.0.0.0/0'" in s.check(P, VPC_RULE, {**good, "cidrIpv4": "0.0.0.0/0"})[0].message
    found = s.check(P, VPC_RULE, {**good, "cidrIpv4": None, "referencedSecurityGroupId": "sg-9"})
    assert "referencedSecurityGroupId" in found[0].message
    assert "ipProtocol='-1'" in s.check(P, VPC_RULE, {**good, "ipProtocol": "-1"})[0].message


# --- GCP ---------------------------------------------------------------------------------------


def fw(**over: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "network": "pool-net",
        "direction": "INGRESS",
        "allows": [{"protocol": "tcp", "ports": ["80"]}],
        "sourceRanges": ["173.245.48.0/20", "2400:cb00::/32"],
    }
    rule.update(over)
    return rule


def test_gcp_firewall_cloudflare_passes(s: SimpleNamespace) -> None:
    assert s.check(P, FIREWALL, fw()) == []


def test_gcp_deny_and_egress_always_fine(s: SimpleNamespace) -> None:
    deny_all = fw(allows=None, denies=[{"protocol": "all"}], sourceRanges=["0.0.0.0/0"])
    assert s.check(P, FIREWALL, deny_all) == []
    egress = fw(direction="EGRESS", allows=[{"protocol": "all"}], destinationRanges=["0.0.0.0/0"])
    assert s.check(P, FIREWALL, egress) == []


@pytest.mark.parametrize(
    ("over", "expect"),
    [
        ({"sourceRanges": ["0.0.0.0/0"]}, "'0.0.0.0/0' is not within"),
        ({"allows": [{"protocol": "tcp", "ports": ["22"]}]}, "ports=['22'] is not exactly ['80']"),
        ({"allows": [{"protocol": "tcp"}]}, "ports=[] is not exactly"),  # all ports
        ({"allows": [{"protocol": "all"}]}, "protocol='all' is not tcp"),
        ({"sourceRanges": None, "sourceTags": ["peer"]}, "sourceTags=['peer'] admits peers"),
        ({"sourceRanges": None}, "sourceRanges is empty"),
        ({"direction": None, "sourceRanges": ["10.0.0.0/8"]}, "'10.0.0.0/8'"),  # default INGRESS
    ],
)
def test_gcp_firewall_violations(s: SimpleNamespace, over: dict[str, Any], expect: str) -> None:
    found = s.check(P, FIREWALL, fw(**over))
    assert len(found) == 1 and expect in found[0].message


# --- Azure -------------------------------------------------------------------------------------


def az_rule(**over: Any) -> dict[str, Any]:
    rule: dict[str, Any] = {
        "name": "cloudflare-http",
        "direction": "Inbound",
        "access": "Allow",
        "protocol": "Tcp",
        "priority": 100,
        "sourcePortRange": "*",
        "destinationPortRange": "80",
        "destinationAddressPrefix": "*",
        "sourceAddressPrefixes": ["173.245.48.0/20", "2400:cb00::/32"],
    }
    rule.update(over)
    return rule


def test_azure_nsg_cloudflare_deny_and_outbound_pass(s: SimpleNamespace) -> None:
    rules = [
        az_rule(),
        az_rule(
            name="deny-all",
            access="Deny",
            protocol="*",
            destinationPortRange="*",
            sourceAddressPrefixes=None,
            sourceAddressPrefix="*",
            priority=4096,
        ),
        az_rule(
            name="out",
            direction="Outbound",
            protocol="*",
            destinationPortRange="*",
            sourceAddressPrefixes=None,
            sourceAddressPrefix="*",
        ),
    ]
    assert s.check(P, NSG, {"securityRules": rules}) == []


@pytest.mark.parametrize(
    ("over", "expect"),
    [
        ({"sourceAddressPrefixes": None, "sourceAddressPrefix": "Internet"}, "'Internet'"),
        ({"sourceAddressPrefixes": None, "sourceAddressPrefix": "*"}, "'*' is not within"),
        ({"sourceAddressPrefixes": None}, "'*' is not within"),  # no source means any
        ({"destinationPortRange": "22"}, "destinationPortRange(s)=['22']"),
        ({"destinationPortRange": None, "destinationPortRanges": ["80", "443"]}, "['80', '443']"),
        ({"protocol": "*"}, "protocol='*' is not Tcp"),
        ({"sourceApplicationSecurityGroups": [{"id": "asg"}]}, "admits peers"),
        ({"access": None, "sourceAddressPrefixes": ["10.0.0.0/8"]}, "'10.0.0.0/8'"),
    ],
)
def test_azure_rule_violations(s: SimpleNamespace, over: dict[str, Any], expect: str) -> None:
    in_nsg = s.check(P, NSG, {"securityRules": [az_rule(**over)]})
    assert len(in_nsg) == 1 and expect in in_nsg[0].message
    assert "securityRules['cloudflare-http']" in in_nsg[0].message
    standalone = s.check(P, AZ_RULE, az_rule(**over))
    assert len(standalone) == 1 and expect in standalone[0].message


def test_azure_standalone_rule_passes(s: SimpleNamespace) -> None:
    assert s.check(P, AZ_RULE, az_rule(direction="inbound", access="allow", protocol="tcp")) == []


# --- config ------------------------------------------------------------------------------------


def test_config_ranges_override_data_file(s: SimpleNamespace) -> None:
    config = {P: {"cloudflareIpv4": ["198.51.100.0/24"]}}
    sg = {"ingress": [cf_ingress(cidrBlocks=["198.51.100.0/24"])]}
    assert s.check(P, SG, sg, config) == []
    assert len(s.check(P, SG, {"ingress": [cf_ingress()]}, config)) == 1


def test_missing_ranges_is_a_clear_error(s: SimpleNamespace, data_dir: Any) -> None:
    (data_dir / "cloudflare.toml").unlink()
    with pytest.raises(PolicyConfigError, match=r"cloudflareIpv4.*cloudflare\.toml"):
        s.check(P, SG, {"ingress": [cf_ingress()]})
    # A stack with nothing to compare needs no ranges.
    assert s.check(P, SG, {"ingress": []}) == []


def test_bad_range_in_config_names_it(s: SimpleNamespace) -> None:
    with pytest.raises(PolicyConfigError, match="'not-a-cidr'"):
        s.check(P, SG, {"ingress": [cf_ingress()]}, {P: {"cloudflareIpv4": ["not-a-cidr"]}})


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    # Half the draws land inside a Cloudflare range, so both verdicts are exercised.
    address=st.one_of(st.ip_addresses(v=4), st.ip_addresses(network="173.245.48.0/20")),
    prefix=st.integers(min_value=0, max_value=32),
)
def test_any_ipv4_source_passes_iff_inside_a_cloudflare_range(
    s: SimpleNamespace, address: ipaddress.IPv4Address, prefix: int
) -> None:
    network = ipaddress.IPv4Network(f"{address}/{prefix}", strict=False)
    allowed = [ipaddress.IPv4Network(c) for c in s.CF_V4]
    inside = any(network.subnet_of(a) for a in allowed)
    found = s.check(P, SG, {"ingress": [cf_ingress(cidrBlocks=[str(network)])]})
    assert (found == []) is inside
