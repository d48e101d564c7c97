"""The analyzer exits with the engine that started it."""

import os
import threading
import time


def exit_with_the_engine(poll: float = 0.5) -> None:
    """Exit once the engine that started this analyzer is gone (SIGKILL of ``pulumi``):
    nobody would call again, and nobody would stop it; without this the analyzer outlived
    every killed run."""
    parent = os.getppid()

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(poll)
        os._exit(0)

    threading.Thread(target=watch, daemon=True, name="engine-watch").start()
