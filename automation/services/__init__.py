"""Service functions: the use cases the CLI, the API and the operator call."""
