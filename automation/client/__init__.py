"""Remote mode: the CLI's side of the HTTP API (``anycloud api use URL``). Imports neither the
server's stack (FastAPI, SQLAlchemy) nor the services: only httpx2, the models and errors."""
