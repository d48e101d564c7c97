"""Agent pools: the AgentPool custom resource (anycloud.sh/v1) and what acts on it."""
