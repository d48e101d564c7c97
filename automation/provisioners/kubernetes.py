"""The ``kubernetes`` and ``nodepool`` provisioners: a deployment's runtime as Kubernetes
objects rendered from the set's templates (Deployment, Service, and optionally PVC and
Ingresses), applied to a cluster with server-side apply.

Every object carries ``anycloud.sh/provision-id=<id>`` and ``app.kubernetes.io/managed-by=
anycloud``; deprovision and check find what an id holds by those labels alone. The Deployment
also carries the checksum of what was rendered (``anycloud.sh/templates-sha256``) and the
request it was rendered with (``anycloud.sh/request``), so ``check`` can render again and
tell a changed template from an object edited by hand.

Requests go out as plain JSON (``kube_api``); what is rendered is handled by ``objects``
(placement on a pool, checksum, drift).

The ``nodepool`` type is the same provisioner aimed at one node pool (seed 003): its objects go
to the pool's namespace on the pool's cluster, and every pod template selects exactly that
pool and tolerates only its taint; a template that would let pods onto another pool is
refused before anything is applied. Its pod templates obey seed 003's GPU work rule too
(``automation/kube/gpu_work.py``, the rule AgentPools obey): whole ``nvidia.com/gpu`` under
the ``nvidia`` RuntimeClass (added, with the accelerator nodeSelector) on a GPU pool, none on a
CPU pool; refused at render, so in preflight and before provision applies anything.
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from automation.errors import AnycloudError, Conflict, InvalidInput
from automation.kube.gpu_work import place_gpu_work
from automation.kube.port import MANAGED_BY, MANAGER, POOL_LABEL
from automation.provisioners.base import Health, Provisioned, ProvisionRequest
from automation.provisioners.kube_api import (
    PLURALS,
    JsonApi,
    KubernetesFailed,
    collection_path,
    object_path,
)
from automation.provisioners.objects import (
    CHECKSUM_ANNOTATION,
    PROVISION_ID_LABEL,
    REQUEST_ANNOTATION,
    RenderedObject,
    checksum,
    differences,
    place_on_pool,
    pod_spec,
    quantity,
)
from automation.provisioners.provisioner_set import (
    KubernetesSpec,
    NodePoolSpec,
    TemplatePaths,
)
from automation.provisioners.templates import (
    TEMPLATE_KINDS,
    Resources,
    TemplateValues,
    object_names,
    read_template,
    render,
)

FIELD_MANAGER = "anycloud"

# Applied in this order (the claim before the pods that mount it), deleted in reverse.
_ORDER = ("pvc", "service", "deployment", "http_ingress", "grpc_ingress")
_DELETE_ORDER = (("networking.k8s.io/v1", "Ingress"), ("v1", "Service"),
                 ("apps/v1", "Deployment"), ("v1", "PersistentVolumeClaim"))
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-_.A-Za-z0-9]{0,61}[A-Za-z0-9])?")


class NotReady(AnycloudError):
    default_code = "RUNTIME_NOT_READY"


@dataclass(frozen=True)
class PoolTarget:
    """Where a nodepool provisioner puts objects: resolved from the ledger by the caller."""

    pool_id: str
    namespace: str
    kubeconfig_path: str
    context: str | None = None
    gpus: int = 0  # NVIDIA GPUs on each of the pool's VMs (the catalog's); 0: a CPU pool


@dataclass(frozen=True)
class _Target:
    namespace: str
    kubeconfig_path: str
    context: str | None
    pool_id: str | None  # set: every pod template is placed on exactly this node pool
    gpus: int = 0  # the pool's GPUs per VM: seed 003's GPU work rule (kube/gpu_work.py)


# -- the provisioner -----------------------------------------------------------------------


class KubernetesProvisioner:
    """The ``kubernetes`` type: ``spec.namespace`` on the cluster of ``spec.kubeconfig_path``
    (template and kubeconfig paths relative to ``base_dir``)."""

    def __init__(self, name: str, spec: KubernetesSpec, base_dir: Path = Path("."), *,
                 context: str | None = None, poll_seconds: float = 0.1,
                 request_timeout: float = 10.0) -> None:
        self._setup(name, spec, base_dir, _Target(spec.namespace, spec.kubeconfig_path,
                                                  context, None),
                    poll_seconds, request_timeout)

    def _setup(self, name: str, spec: KubernetesSpec | NodePoolSpec, base_dir: Path,
               target: _Target, poll_seconds: float, request_timeout: float) -> None:
        self.name = name
        self.spec = spec
        self.base_dir = base_dir
        self.target = target
        self.namespace = target.namespace
        self.poll_seconds = poll_seconds
        self.request_timeout = request_timeout
        self._client: JsonApi | None = None

    @property
    def api(self) -> JsonApi:
        if self._client is None:
            path = Path(self.target.kubeconfig_path).expanduser()
            self._client = JsonApi(path if path.is_absolute() else self.base_dir / path,
                                self.target.context, self.request_timeout)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None

    # -- the protocol ----------------------------------------------------------------------

    def provision(self, provision_id: str, request: ProvisionRequest) -> Provisioned:
        """Render, check (placement, namespace, the claim never shrinks, nothing foreign of
        the same name), then apply every object. Applying the same id and request again
        changes nothing: server-side apply of the same body is a no-op."""
        objects = self.render(provision_id, request)
        sha = checksum(objects)
        for o in objects:
            if o.kind == "Deployment":
                notes = o.body["metadata"].setdefault("annotations", {})
                notes[CHECKSUM_ANNOTATION] = sha
                notes[REQUEST_ANNOTATION] = json.dumps(asdict(request), sort_keys=True)
        live = {o.key: self._get(o.body) for o in objects}
        for o in objects:
            self._refuse_foreign(o, live[o.key], provision_id)
            if o.kind == "PersistentVolumeClaim":
                self._refuse_shrink(o, live[o.key])
        self._ensure_namespace()
        warnings = []
        for o in objects:
            taken = self._apply(o)
            if taken:
                warnings.append(f"{o.ref}: took back fields edited by hand ({taken})")
        return Provisioned(provision_id=provision_id, provisioner=self.name,
                           host=self.spec.host.replace("*", provision_id),
                           data_dir=self.spec.data_dir, warnings=tuple(warnings),
                           checksum=sha)

    def preflight(self, provision_id: str, request: ProvisionRequest) -> None:
        """The templates render with this deployment's values, the kubeconfig is readable,
        the API server answers, and its RBAC lets us make the runtime's Deployment in the
        namespace (a SelfSubjectAccessReview, what `kubectl auth can-i` asks)."""
        self.render(provision_id, request)
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": {"namespace": self.namespace,
                                                  "verb": "create", "group": "apps",
                                                  "resource": "deployments"}}}
        answer = self.api.expect(
            "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
            "a SelfSubjectAccessReview", body=review)
        if not (answer or {}).get("status", {}).get("allowed"):
            why = (answer or {}).get("status", {}).get("reason") or "RBAC does not allow it"
            raise KubernetesFailed(f"not allowed to create Deployments in namespace "
                                   f"{self.namespace} on this cluster: {why}",
                                   code="NAMESPACE_NOT_ALLOWED")

    def await_ready(self, provisioned: Provisioned) -> None:
        """Returns once the Deployment is Available with its current template rolled out;
        after ``spec.timeout_seconds`` raises NotReady naming the pods and why."""
        pid = provisioned.provision_id
        deadline = time.monotonic() + self.spec.timeout_seconds
        while True:
            deployment = self._deployment(pid)
            if deployment is not None and _available(deployment):
                return
            if time.monotonic() >= deadline:
                break
            time.sleep(self.poll_seconds)
        if deployment is None:
            raise NotReady(f"{pid}: no Deployment labelled {PROVISION_ID_LABEL}={pid} in "
                           f"namespace {self.namespace} (provision it first)")
        raise NotReady(f"{pid}: Deployment {deployment['metadata']['name']} not available "
                       f"after {self.spec.timeout_seconds} s: "
                       f"{self._why_unavailable(deployment)}")

    def deprovision(self, provision_id: str) -> bool:
        """Deletes exactly the objects labelled with the id (the claim too), pods first
        (foreground), and waits for them to go; False when there was nothing."""
        _check_id(provision_id)
        found = [(api_version, kind, obj) for api_version, kind in _DELETE_ORDER
                 for obj in self._labelled(api_version, kind, provision_id)]
        for api_version, kind, obj in found:
            meta = obj["metadata"]
            path = f"{collection_path(api_version, kind, self.namespace)}/{meta['name']}"
            self.api.expect("DELETE", path, f"delete {kind} {meta['name']}", ok=(404, 409),
                            body={"kind": "DeleteOptions", "apiVersion": "v1",
                                  "propagationPolicy": "Foreground",
                                  "preconditions": {"uid": meta["uid"]}})
        deadline = time.monotonic() + self.spec.timeout_seconds
        left = found
        while left:
            left = [(a, k, o) for a, k, o in left if self._still_there(a, k, o)]
            if not left:
                break
            if time.monotonic() >= deadline:
                names = ", ".join(f"{k} {o['metadata']['name']}" for _, k, o in left)
                raise KubernetesFailed(f"{provision_id}: still present "
                                       f"{self.spec.timeout_seconds} s after delete: {names}")
            time.sleep(self.poll_seconds)
        return bool(found)

    def check(self, provision_id: str) -> Health:
        """Present, available, and still what was applied: the templates rendered now give
        the checksum on the Deployment, and no field we set was changed by someone else."""
        deployment = self._deployment(provision_id)
        if deployment is None:
            return Health(False, f"{provision_id}: no Deployment labelled "
                                 f"{PROVISION_ID_LABEL}={provision_id} in {self.namespace}")
        notes = deployment["metadata"].get("annotations") or {}
        try:
            request = ProvisionRequest(**json.loads(notes[REQUEST_ANNOTATION]))
        except (KeyError, ValueError, TypeError):
            request = ProvisionRequest()
        problems = []
        try:
            objects = self.render(provision_id, request)
        except InvalidInput as exc:
            return Health(False, f"{provision_id}: the templates no longer render: "
                                 f"{exc.message}")
        now, applied = checksum(objects), notes.get(CHECKSUM_ANNOTATION)
        if now != applied:
            problems.append(f"templates changed since provisioning ({CHECKSUM_ANNOTATION} "
                            f"{(applied or 'absent')[:12]}, rendered now {now[:12]}): "
                            "provision again to apply them")
        for o in objects:
            live = self._get(o.body)
            if live is None:
                problems.append(f"{o.ref} is missing")
            elif (live["metadata"].get("labels") or {}).get(PROVISION_ID_LABEL) \
                    != provision_id:
                problems.append(f"{o.ref} is not labelled {PROVISION_ID_LABEL}="
                                f"{provision_id}")
            elif now == applied:
                # Against a changed template every field would look edited: compare only
                # while the templates are what was applied.
                edited = list(differences(_spec_and_meta(o.body), live))
                if edited:
                    problems.append(f"{o.ref} edited by hand: {'; '.join(edited[:5])}")
        if not _available(deployment):
            problems.append(f"Deployment {deployment['metadata']['name']} not available: "
                            f"{self._why_unavailable(deployment)}")
        if problems:
            return Health(False, "; ".join(problems))
        return Health(True, f"{len(objects)} object(s) in {self.namespace} as applied, "
                            f"Deployment {deployment['metadata']['name']} available")

    # -- rendering -------------------------------------------------------------------------

    def render(self, provision_id: str, request: ProvisionRequest) -> list[RenderedObject]:
        """The objects of the id, labelled and placed, in apply order; InvalidInput naming
        the template when one cannot be used."""
        _check_id(provision_id)
        values = TemplateValues(
            provision_id=provision_id, host=self.spec.host.replace("*", provision_id),
            image=self.spec.image, data_dir=self.spec.data_dir, namespace=self.namespace,
            resources=Resources(**self.spec.per_slot.model_dump()).given_or_per_slot(
                request.slots, request.cpu, request.memory, request.storage),
            data_bucket=self.spec.data_bucket, metastore_id=self.spec.metastore_id)
        paths: TemplatePaths = self.spec.template_paths
        out = []
        for key in _ORDER:
            rel = getattr(paths, key)
            if rel is None:
                continue
            field = f"{self.name}.spec.template_paths.{key}"
            path = self.base_dir / rel
            body = render(field, path, read_template(field, path), values)
            self._complete(key, field, path, body, provision_id)
            out.append(RenderedObject(key, body))
        return out

    def _complete(self, key: str, field: str, path: Path, body: dict[str, Any],
                  provision_id: str) -> None:
        if body.get("kind") != TEMPLATE_KINDS[key] or not body.get("apiVersion"):
            raise InvalidInput(field, str(path), f"must render a {TEMPLATE_KINDS[key]}, got "
                                                 f"kind {body.get('kind')!r}")
        meta = body.setdefault("metadata", {})
        if not meta.get("name"):  # Rill's templates name nothing: the name is ours to give
            meta["name"] = object_names(provision_id)[key]
        if meta.setdefault("namespace", self.namespace) != self.namespace:
            raise InvalidInput(f"{field} metadata.namespace", meta["namespace"],
                               f"must be {self.namespace} (the provisioner's namespace; "
                               "use {{ namespace }})")
        labels = meta.setdefault("labels", {})
        for label, value in ((PROVISION_ID_LABEL, provision_id), (MANAGED_BY, MANAGER)):
            if labels.get(label) not in (None, value):
                raise InvalidInput(f"{field} metadata.labels.{label}", labels[label],
                                   "is set by the provisioner: leave it out")
            labels[label] = value
        spec = pod_spec(body)
        if spec is not None:
            # The pods carry the id too: what is running for an id is one selector away.
            template = body["spec"]["template"] if body["kind"] != "Pod" else body
            tlabels = template.setdefault("metadata", {}).setdefault("labels", {})
            tlabels[PROVISION_ID_LABEL] = provision_id
            if self.target.pool_id is not None:
                where = f"{field} spec.template.spec"
                place_on_pool(spec, self.target.pool_id, where)
                place_gpu_work(spec, gpus=self.target.gpus, pool=self.target.pool_id,
                               field=where)

    # -- API steps -------------------------------------------------------------------------

    def _get(self, body: dict[str, Any]) -> dict[str, Any] | None:
        return self.api.expect("GET", object_path(body), f"get {body['kind']} "
                               f"{body['metadata']['name']}", ok=(404,))

    def _refuse_foreign(self, o: RenderedObject, live: dict[str, Any] | None,
                        provision_id: str) -> None:
        if live is None:
            return
        holder = (live["metadata"].get("labels") or {}).get(PROVISION_ID_LABEL)
        if holder != provision_id:
            raise Conflict(f"{o.ref} already exists in {self.namespace} and is not "
                           f"provision {provision_id}'s ({PROVISION_ID_LABEL}="
                           f"{holder or '(none)'}): refusing to take it over",
                           code="OBJECT_EXISTS", field=o.key, value=o.name,
                           rule="templates must render names unique to the provision id")

    def _refuse_shrink(self, o: RenderedObject, live: dict[str, Any] | None) -> None:
        if live is None:
            return
        have = ((live.get("spec") or {}).get("resources") or {}).get("requests", {}) \
            .get("storage")
        want = o.body["spec"]["resources"]["requests"]["storage"]
        if have is not None and quantity(have) is not None and quantity(want) is not None \
                and quantity(have) > quantity(want):
            raise Conflict(f"{o.ref} asks {have}; the request asks {want}: a claim is never "
                           "shrunk (its data would not fit)", code="PVC_SHRINK",
                           field="storage", value=want,
                           rule=f"at least the claim's current size {have}")

    def _ensure_namespace(self) -> None:
        path = f"/api/v1/namespaces/{self.namespace}"
        if self.api.expect("GET", path, f"get namespace {self.namespace}", ok=(404,)):
            return
        labels = {MANAGED_BY: MANAGER}
        if self.target.pool_id is not None:
            # The reconciler deletes the pool's namespace with the pool when it is ours.
            labels[POOL_LABEL] = self.target.pool_id
        self.api.expect("POST", "/api/v1/namespaces", f"create namespace {self.namespace}",
                        ok=(409,), body={"apiVersion": "v1", "kind": "Namespace",
                                         "metadata": {"name": self.namespace,
                                                      "labels": labels}})

    def _apply(self, o: RenderedObject) -> str:
        """Server-side apply as ``anycloud``; the conflict text when fields had to be taken
        back, else "".

        Without force first: a conflict means another manager (``kubectl edit``, a
        ``kubectl patch``) changed a field our template sets. The object is ours (its
        provision-id label was checked before anything was applied), and the template is
        the source of truth for the fields it sets, so we apply again with force: it takes
        back only those fields, and fields others added that we do not set stay theirs.
        An object that is not ours is refused before this point, never forced."""
        path = object_path(o.body)
        query = [("fieldManager", FIELD_MANAGER)]
        taken = ""
        for force in (False, True):
            status, _, message = self.api.call(
                "PATCH", path, body=json.dumps(o.body),
                query=query + ([("force", "true")] if force else []),
                content_type="application/apply-patch+yaml")
            if 200 <= status < 300:
                return taken if force else ""
            if status == 409 and not force:
                taken = message
                continue
            if status in (400, 422):
                raise InvalidInput(f"{self.name}.spec.template_paths.{o.key}", o.name,
                                   f"the API server refused the rendered {o.kind}: {message}")
            raise KubernetesFailed(f"the API server answered {status} to apply {o.ref} in "
                                   f"{self.namespace}: {message}")
        raise AssertionError("unreachable: the second pass returns or raises")

    def _labelled(self, api_version: str, kind: str, provision_id: str
                  ) -> list[dict[str, Any]]:
        found = self.api.expect("GET", collection_path(api_version, kind, self.namespace),
                                f"list {PLURALS[kind]} of {provision_id}",
                                query=[("labelSelector", _selector(provision_id))])
        return list((found or {}).get("items") or [])

    def _still_there(self, api_version: str, kind: str, obj: dict[str, Any]) -> bool:
        meta = obj["metadata"]
        path = f"{collection_path(api_version, kind, self.namespace)}/{meta['name']}"
        live = self.api.expect("GET", path, f"get {kind} {meta['name']}", ok=(404,))
        return live is not None and live["metadata"].get("uid") == meta["uid"]

    def _deployment(self, provision_id: str) -> dict[str, Any] | None:
        found = self._labelled("apps/v1", "Deployment", provision_id)
        return found[0] if found else None

    def _why_unavailable(self, deployment: dict[str, Any]) -> str:
        """The Deployment's own conditions, then each pod's phase, failed conditions and
        waiting containers: what ``kubectl describe`` would show first."""
        status = deployment.get("status") or {}
        replicas = deployment["spec"].get("replicas", 1)
        parts = [f"{status.get('availableReplicas', 0)}/{replicas} replica(s) available"]
        # The two reasons ``_available`` gives before the conditions: a new spec not yet seen
        # by the controller, or a rollout still under way.
        if status.get("observedGeneration", 0) < deployment["metadata"].get("generation", 1):
            parts.append("its controller has not observed the latest spec yet")
        elif status.get("updatedReplicas", 0) < replicas:
            parts.append(f"rolling out: {status.get('updatedReplicas', 0)}/{replicas} "
                         "replica(s) updated")
        for c in status.get("conditions") or []:
            if c.get("status") != "True" and c.get("message"):
                parts.append(f"{c['type']}: {c['message']}")
        selector = ",".join(f"{k}={v}" for k, v in
                            (deployment["spec"]["selector"].get("matchLabels") or {}).items())
        pods = self.api.expect("GET", f"/api/v1/namespaces/{self.namespace}/pods",
                               "list pods", query=[("labelSelector", selector)]) or {}
        items = pods.get("items") or []
        if not items:
            parts.append("no pods")
        for pod in items:
            parts.append(f"pod {pod['metadata']['name']} {_pod_state(pod)}")
        return "; ".join(parts)


class NodePoolProvisioner(KubernetesProvisioner):
    """The ``nodepool`` type: the kubernetes type on one node pool's namespace and cluster;
    every pod template selects exactly that pool, tolerates only its taint and obeys the
    GPU work rule for the pool's GPU count."""

    def __init__(self, name: str, spec: NodePoolSpec, pool: PoolTarget,
                 base_dir: Path = Path("."), *, poll_seconds: float = 0.1,
                 request_timeout: float = 10.0) -> None:
        self.pool = pool
        self._setup(name, spec, base_dir, _Target(pool.namespace, pool.kubeconfig_path,
                                                  pool.context, pool.pool_id, pool.gpus),
                    poll_seconds, request_timeout)


# -- helpers -------------------------------------------------------------------------------


def _check_id(provision_id: str) -> None:
    # The id is a label value on every object: 63 characters of the label alphabet.
    if not _LABEL_VALUE.fullmatch(provision_id):
        raise InvalidInput("provision id", provision_id,
                           "must be a Kubernetes label value: 1-63 letters, digits, '-', "
                           "'_' or '.', starting and ending alphanumeric")


def _selector(provision_id: str) -> str:
    return f"{PROVISION_ID_LABEL}={provision_id},{MANAGED_BY}={MANAGER}"


def _spec_and_meta(body: dict[str, Any]) -> dict[str, Any]:
    """What we set that must still be there: labels, annotations and the spec."""
    meta = body["metadata"]
    out: dict[str, Any] = {"metadata": {"labels": meta.get("labels") or {}}}
    if meta.get("annotations"):
        out["metadata"]["annotations"] = meta["annotations"]
    for key, value in body.items():
        if key not in ("apiVersion", "kind", "metadata"):
            out[key] = value
    return out


def _available(deployment: dict[str, Any]) -> bool:
    status = deployment.get("status") or {}
    meta = deployment["metadata"]
    if status.get("observedGeneration", 0) < meta.get("generation", 1):
        return False  # the controller has not seen the latest spec yet
    replicas = deployment["spec"].get("replicas", 1)
    if status.get("updatedReplicas", 0) < replicas:
        return False
    return any(c.get("type") == "Available" and c.get("status") == "True"
               for c in status.get("conditions") or [])


def _pod_state(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    parts = [status.get("phase") or "Unknown"]
    if pod["metadata"].get("deletionTimestamp"):
        parts.append("terminating")
    for c in status.get("conditions") or []:
        if c.get("status") != "True":
            why = ": ".join(x for x in (c.get("reason"), c.get("message")) if x)
            parts.append(f"{c['type']}=False" + (f" ({why})" if why else ""))
    for cs in status.get("containerStatuses") or []:
        waiting = (cs.get("state") or {}).get("waiting")
        if waiting:
            parts.append(f"container {cs['name']} waiting: {waiting.get('reason')}"
                         + (f" {waiting['message']}" if waiting.get("message") else ""))
    return ", ".join(parts)

