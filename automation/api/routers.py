"""The router every route module starts from: the ``/v1`` prefix, its tag, and the problem
answers any route may give (declared in the OpenAPI document, so the SDK knows them)."""

from __future__ import annotations

from fastapi import APIRouter

from automation.api.problems import RESPONSES
from automation.api.security import PREFIX


def v1(tag: str) -> APIRouter:
    return APIRouter(prefix=PREFIX, tags=[tag], responses=RESPONSES)
