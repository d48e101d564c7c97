"""Stack program for one pool's ingress release: its Traefik HelmChart (one stack per pool
that hosts a Service, destroyed when the pool is deleted)."""

from __future__ import annotations

from collections.abc import Callable

import pulumi

from components.pins import Pins
from components.traefik import TraefikIngress, release_name
from stacks.config import IngressReleaseStackConfig
from stacks.pins import load_pins
from stacks.providers import kube_provider

CONFIG_KEY = "ingressRelease"  # `anycloud:ingressRelease`, a JSON object


def build_program(config: IngressReleaseStackConfig,
                  pins: Pins | None = None) -> Callable[[], None]:
    def program() -> None:
        p = pins or load_pins()
        kube = kube_provider(config.cluster)
        TraefikIngress("ingress", config.cluster.id, config.pool_id, p.traefik,
                       pulumi.ResourceOptions(providers=[kube]))
        pulumi.export("release", release_name(config.pool_id))

    return program


def program_from_pulumi_config() -> None:
    raw = pulumi.Config("anycloud").require_object(CONFIG_KEY)
    build_program(IngressReleaseStackConfig.model_validate(raw))()
