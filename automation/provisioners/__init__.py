"""Provisioners: where a deployment's runtime comes from (seed 002). One module per job: the
set and its checks (``provisioner_set``), templates, the resolution order (``resolve``)."""
