"""OpenAPI links: what a create answers leads to (its ``id`` is the ``ref`` of the record's
own routes). Clients and generators read them; schemathesis' stateful phase chains them
(create a pool, then read, plan and delete that pool)."""

from __future__ import annotations

from typing import Any

# A create route -> the routes of the record it made, each taking the record's id as {ref}.
FOLLOWS: dict[str, list[tuple[str, str]]] = {
    "/v1/node-pools": [("get", "/v1/node-pools/{ref}"), ("get", "/v1/node-pools/{ref}/plan"),
                       ("get", "/v1/node-pools/{ref}/policy"),
                       ("post", "/v1/node-pools/{ref}/unlock"),
                       ("delete", "/v1/node-pools/{ref}")],
    "/v1/clusters": [("get", "/v1/clusters/{ref}"), ("post", "/v1/clusters/{ref}/refresh"),
                     ("delete", "/v1/clusters/{ref}")],
    "/v1/credentials": [("post", "/v1/credentials/{ref}/rotate"),
                        ("delete", "/v1/credentials/{ref}")],
    "/v1/deployments": [("get", "/v1/deployments/{ref}"),
                        ("post", "/v1/deployments/{ref}/start"),
                        ("post", "/v1/deployments/{ref}/stop"),
                        ("post", "/v1/deployments/{ref}/restart"),
                        ("delete", "/v1/deployments/{ref}")],
    "/v1/projects": [("post", "/v1/sudo/projects/{ref}/provisioner"),
                     ("post", "/v1/sudo/projects/{ref}/restart")],
    "/v1/orgs": [("post", "/v1/sudo/orgs/{ref}/default-provisioner")],
}


def add_links(document: dict[str, Any]) -> dict[str, Any]:
    paths = document.get("paths", {})
    for create, follows in FOLLOWS.items():
        answer = paths.get(create, {}).get("post", {}).get("responses", {}).get("201")
        if answer is None:
            continue
        answer["links"] = {
            _name(method, path): {
                "operationRef": "#/paths/" + path.replace("~", "~0").replace("/", "~1")
                                + f"/{method}",
                "parameters": {"ref": "$response.body#/id"}}
            for method, path in follows if method in paths.get(path, {})}
    return document


def _name(method: str, path: str) -> str:
    words = [w for w in path.removeprefix("/v1/").split("/") if w != "{ref}"]
    return method.capitalize() + "".join(w.replace("-", " ").title().replace(" ", "")
                                         for w in words)
