"""A local Kubernetes control plane (etcd, API server, controller-manager, scheduler, and
kwok playing the kubelets) from binaries built by ``tools/build.py``: for the test suite and
for ``anycloud demo --cluster local``. Never pointed at a user's cluster."""
