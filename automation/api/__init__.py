"""The hosted control plane's HTTP API (issue 20): routes over the same service functions the
CLI calls, the same camelCase models, problem+json errors, a token and a role on every call."""
