"""One module per resource; each a router whose routes name their gate (api.security)."""
