"""The Kubernetes side: reading cluster facts through the official client."""
