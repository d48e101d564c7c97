"""IsolatedNetwork per cloud: outbound only, except exactly the edge HTTP rule when hosting."""

from __future__ import annotations

from typing import Any

import pytest

from stacks.pins import load_pins

EDGE = load_pins().edge
PROVIDERS = ("aws", "gcp", "azure")


def _under(run: Any, component_type: str) -> list[Any]:
    return [r for r in run.resources if f"::{component_type}$" in r.urn]


# ---------------------------------------------------------------- AWS


def test_aws_security_group_has_no_ingress_and_open_egress(h: Any) -> None:
    sg = h.run_pool("aws").one("aws:ec2/securityGroup:SecurityGroup")
    assert sg.inputs.get("ingress", []) == []
    (egress,) = sg.inputs["egress"]
    assert egress["protocol"] == "-1" and egress["cidrBlocks"] == ["0.0.0.0/0"]
    # Nothing else may open the pool: no standalone rules, no peering.
    types = {r.type for r in h.run_pool("aws").resources}
    assert not {
        t for t in types if "ingressRule" in t or "securityGroupRule" in t or "Peering" in t
    }


def test_aws_hosting_pool_admits_only_http_from_cloudflare(h: Any) -> None:
    sg = h.run_pool("aws", hosts_service=True).one("aws:ec2/securityGroup:SecurityGroup")
    (rule,) = sg.inputs["ingress"]
    assert (rule["protocol"], rule["fromPort"], rule["toPort"]) == ("tcp", 80, 80)
    assert rule["cidrBlocks"] == list(EDGE.ipv4)
    assert rule["ipv6CidrBlocks"] == list(EDGE.ipv6)
    assert "0.0.0.0/0" not in rule["cidrBlocks"]


def test_aws_network_resources_are_the_pools_own(h: Any) -> None:
    run = h.run_pool("aws")
    children = _under(run, "anycloud:network:AwsIsolatedNetwork")
    assert {r.type for r in children} == {
        "aws:ec2/vpc:Vpc",
        "aws:ec2/subnet:Subnet",
        "aws:ec2/internetGateway:InternetGateway",
        "aws:ec2/routeTable:RouteTable",
        "aws:ec2/routeTableAssociation:RouteTableAssociation",
        "aws:ec2/securityGroup:SecurityGroup",
    }
    subnet = run.one("aws:ec2/subnet:Subnet")
    assert subnet.inputs["availabilityZone"] == "us-east-1a"
    (route,) = run.one("aws:ec2/routeTable:RouteTable").inputs["routes"]
    assert route["cidrBlock"] == "0.0.0.0/0"
    vpc = run.one("aws:ec2/vpc:Vpc")
    assert vpc.inputs["tags"]["anycloud.sh/node-pool"] == "np-7f3k"


# ---------------------------------------------------------------- GCP


def _firewalls(run: Any) -> list[Any]:
    return run.of_type("gcp:compute/firewall:Firewall")


def test_gcp_denies_all_ingress_and_allows_egress(h: Any) -> None:
    run = h.run_pool("gcp")
    net = run.one("gcp:compute/network:Network")
    assert net.inputs["autoCreateSubnetworks"] is False
    ingress = [f for f in _firewalls(run) if f.inputs["direction"] == "INGRESS"]
    assert ingress and all("allows" not in f.inputs for f in ingress)
    assert {tuple(f.inputs["sourceRanges"]) for f in ingress} == {("0.0.0.0/0",), ("::/0",)}
    assert all(f.inputs["denies"] == [{"protocol": "all"}] for f in ingress)
    (egress,) = [f for f in _firewalls(run) if f.inputs["direction"] == "EGRESS"]
    assert egress.inputs["allows"] == [{"protocol": "all"}]
    assert egress.inputs["destinationRanges"] == ["0.0.0.0/0"]


def test_gcp_hosting_pool_admits_only_http_from_cloudflare(h: Any) -> None:
    run = h.run_pool("gcp", hosts_service=True)
    allows = [
        f for f in _firewalls(run) if f.inputs["direction"] == "INGRESS" and "allows" in f.inputs
    ]
    # One rule, split per address family (GCP rejects mixed families in one rule).
    assert len(allows) == 2
    assert sorted(tuple(f.inputs["sourceRanges"]) for f in allows) == sorted(
        [tuple(EDGE.ipv4), tuple(EDGE.ipv6)]
    )
    for f in allows:
        assert f.inputs["allows"] == [{"protocol": "tcp", "ports": ["80"]}]
        assert f.inputs["priority"] < 65534  # beats the explicit deny
        assert "targetTags" not in f.inputs  # the whole pool network


# ---------------------------------------------------------------- Azure


def test_azure_nsg_denies_internet_inbound_and_is_on_the_subnet(h: Any) -> None:
    run = h.run_pool("azure")
    nsg = run.one("azure-native:network:NetworkSecurityGroup")
    rules = nsg.inputs["securityRules"]
    assert [r for r in rules if r["direction"] == "Inbound" and r["access"] == "Allow"] == []
    (deny,) = rules
    assert (deny["access"], deny["sourceAddressPrefix"]) == ("Deny", "Internet")
    subnet = run.one("azure-native:network:Subnet")
    assert subnet.inputs["networkSecurityGroup"]["id"] == nsg.id
    rg = run.one("azure-native:resources:ResourceGroup")
    assert rg.inputs["resourceGroupName"] == "anycloud-np-7f3k"


def test_azure_hosting_pool_admits_only_http_from_cloudflare(h: Any) -> None:
    nsg = h.run_pool("azure", hosts_service=True).one("azure-native:network:NetworkSecurityGroup")
    allows = [r for r in nsg.inputs["securityRules"] if r["access"] == "Allow"]
    assert len(allows) == 2
    assert sorted(tuple(r["sourceAddressPrefixes"]) for r in allows) == sorted(
        [tuple(EDGE.ipv4), tuple(EDGE.ipv6)]
    )
    for r in allows:
        assert (r["direction"], r["protocol"], r["destinationPortRange"]) == (
            "Inbound",
            "Tcp",
            "80",
        )
        assert r["destinationAddressPrefix"] == "*"


# ---------------------------------------------------------------- all clouds


@pytest.mark.parametrize("provider", PROVIDERS)
def test_network_children_are_parented_to_the_component(h: Any, provider: str) -> None:
    run = h.run_pool(provider)
    comp = next(r for r in run.resources if r.type.startswith("anycloud:network:"))
    children = run.children_of(comp.urn)
    assert children
    for child in children:
        assert child.urn.split("::")[2].startswith(f"{comp.type}$")
