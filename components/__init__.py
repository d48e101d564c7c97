"""Pulumi ComponentResources for node pools. No I/O besides registering resources."""
