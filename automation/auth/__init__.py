"""Who is calling, and what they may do: API tokens (opaque, stored as a hash) and roles.

Below the control loops so the agent broker checks the same tokens as the API."""
