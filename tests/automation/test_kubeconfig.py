import base64
from pathlib import Path

import pytest
import yaml

from automation.kube.kubeconfig import read_context_target


def _write(path: Path, clusters: list[dict], contexts: list[dict], current: str | None) -> Path:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": clusters, "contexts": contexts,
        **({"current-context": current} if current else {}),
    }))
    return path


def test_current_context_and_inline_ca(tmp_path: Path) -> None:
    kc = _write(tmp_path / "kc", [
        {"name": "a", "cluster": {
            "server": "https://a:6443",
            "certificate-authority-data": base64.b64encode(b"CA-A").decode(),
        }},
        {"name": "b", "cluster": {"server": "https://b:6443", "certificate-authority": "b.pem"}},
    ], [{"name": "ca", "context": {"cluster": "a"}}, {"name": "cb", "context": {"cluster": "b"}}],
        "ca")
    (tmp_path / "b.pem").write_bytes(b"CA-B")
    assert read_context_target(kc).ca_pem == b"CA-A"
    b = read_context_target(kc, "cb")  # relative CA path resolves beside the kubeconfig
    assert (b.server_url, b.ca_pem) == ("https://b:6443", b"CA-B")


@pytest.mark.parametrize(("clusters", "contexts", "current", "ctx", "match"), [
    ([], [], None, None, "no current-context"),
    ([], [], "x", None, "no context named 'x'"),
    ([], [{"name": "x", "context": {"cluster": "c"}}], "x", None, "no cluster named 'c'"),
    ([{"name": "c", "cluster": {}}], [{"name": "x", "context": {"cluster": "c"}}], "x", None,
     "has no server"),
    ([{"name": "c", "cluster": {"server": "https://c", "certificate-authority-data": "%%"}}],
     [{"name": "x", "context": {"cluster": "c"}}], "x", None, "not base64"),
    ([{"name": "c", "cluster": {"server": "https://c", "certificate-authority": "/no/ca"}}],
     [{"name": "x", "context": {"cluster": "c"}}], "x", None, "cannot read certificate-authority"),
])
def test_broken_kubeconfigs_name_the_problem(
    tmp_path: Path, clusters: list, contexts: list, current: str | None, ctx: str | None,
    match: str,
) -> None:
    with pytest.raises(ValueError, match=match):
        read_context_target(_write(tmp_path / "kc", clusters, contexts, current), ctx)


def test_not_yaml(tmp_path: Path) -> None:
    (tmp_path / "kc").write_text("- [unclosed")
    with pytest.raises(ValueError, match="cannot load kubeconfig"):
        read_context_target(tmp_path / "kc")
