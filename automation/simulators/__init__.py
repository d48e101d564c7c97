"""In-memory stand-ins for the outside world (the cluster), driven by an injected clock."""
