"""The anycloud API from Python: ``Client`` and the models of ``anycloud_sdk.models``."""

from anycloud_sdk.client import (
    ApiError,
    BadRequest,
    Client,
    Conflict,
    NotFound,
    PermissionDenied,
    PreconditionFailed,
    ServerError,
    TooManyRequests,
    Unauthenticated,
)

__all__ = ["ApiError", "BadRequest", "Client", "Conflict", "NotFound", "PermissionDenied",
           "PreconditionFailed", "ServerError", "TooManyRequests", "Unauthenticated"]
