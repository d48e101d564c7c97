"""Names, tags and labels: valid on every cloud; components stay free of the control plane."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from components import naming

GCP_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
GCP_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
COMPONENTS = Path(__file__).resolve().parents[2] / "components"


def test_gcp_label_keys_are_valid_and_documented_mapping() -> None:
    tags = naming.ownership_tags(cluster_id="Cl.1", pool_id="np-1", attempt_id="AT/2")
    labels = naming.gcp_labels(tags)
    assert set(labels) == {"anycloud-sh_cluster", "anycloud-sh_node-pool", "anycloud-sh_attempt"}
    assert all(GCP_KEY.match(k) and GCP_VALUE.match(v) for k, v in labels.items())


def test_azure_tag_names_have_no_slash() -> None:
    tags = naming.azure_tags(naming.ownership_tags(cluster_id="c", pool_id="p", attempt_id="a"))
    assert set(tags) == {"anycloud.sh_cluster", "anycloud.sh_node-pool", "anycloud.sh_attempt"}


@given(st.text(min_size=1, max_size=120))
def test_node_names_are_dns_labels(attempt_id: str) -> None:
    name = naming.node_name(attempt_id)
    assert len(name) <= 63 and DNS1123_LABEL.match(name), name


@given(st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=40))
def test_node_names_are_stable_and_readable(attempt_id: str) -> None:
    assert naming.node_name(attempt_id) == naming.node_name(attempt_id)
    if attempt_id.strip("-"):
        assert naming.node_name(attempt_id) == f"anycloud-{attempt_id.strip('-')}"


def test_components_never_import_the_control_plane() -> None:
    for path in COMPONENTS.rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not any(n.split(".")[0] in {"automation", "stacks"} for n in names), path
