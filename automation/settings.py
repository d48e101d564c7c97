"""Where anycloud keeps its state, and how many stack operations a reconcile pass may run.

Read straight from the environment: this runs on every command, and pydantic-settings
costs ~150 ms to import, half the start-up budget of ``node-pool list``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from automation.errors import InvalidInput

DEFAULT_PER_CREDENTIAL = 4
# Memory, not CPU, bounds it: each operation in flight is a worker process (and, with the
# Pulumi engine, a CLI and provider plugins): ~0.2-0.5 GB each, ~4 GB at 8. Operations wait
# on the cloud most of the time, so more of them than cores is the point.
DEFAULT_OVERALL = 8
# Seconds a stack operation run in a worker may take before the worker, its engine and the
# engine's plugins are ended (ANYCLOUD_STACK_TIMEOUT): above an Azure GPU pool's slowest
# up (VMs take ~150 s each, in parallel) with a wide margin, and below "hung for good".
DEFAULT_STACK_TIMEOUT = 3600.0
# Seconds between a pool's periodic drift checks (ANYCLOUD_DRIFT_INTERVAL; 0: off). Each is a
# refresh previewed (every resource read from the provider): hourly on the Pulumi engine;
# off by default on the mock engine, whose simulated cloud only drifts when a test says so.
DEFAULT_DRIFT_INTERVAL = {"pulumi": 3600.0, "mock": 0.0}


@dataclass(frozen=True)
class Limits:
    per_credential: int = DEFAULT_PER_CREDENTIAL
    overall: int = DEFAULT_OVERALL
    # Where the two numbers came from, for error messages (a CLI option or a variable).
    fields: tuple[str, str] = ("per_credential", "overall")
    stack_timeout: float = DEFAULT_STACK_TIMEOUT  # seconds, for operations run in workers

    def __post_init__(self) -> None:
        for name, value in ((self.fields[0], self.per_credential),
                            (self.fields[1], self.overall)):
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidInput(name, value, "must be a whole number of at least 1")
        if not self.stack_timeout > 0:
            raise InvalidInput("ANYCLOUD_STACK_TIMEOUT", self.stack_timeout,
                               "must be a number of seconds above 0")

    @property
    def serial(self) -> bool:
        return self.overall == 1


@dataclass(frozen=True)
class Settings:
    home: Path
    database_url: str
    # Stack operations a reconcile pass runs at once, in all and per credential
    # (ANYCLOUD_CONCURRENCY, ANYCLOUD_CONCURRENCY_PER_CREDENTIAL); checked when used, so a
    # bad value never breaks commands that do not reconcile.
    concurrency: str | None = None
    concurrency_per_credential: str | None = None
    stack_timeout: str | None = None  # ANYCLOUD_STACK_TIMEOUT, seconds
    drift_interval: str | None = None  # ANYCLOUD_DRIFT_INTERVAL, seconds (0: off)

    @classmethod
    def from_env(cls, home: str | os.PathLike[str] | None = None) -> Settings:
        root = Path(home or os.environ.get("ANYCLOUD_HOME") or Path.home() / ".anycloud")
        root = root.expanduser()
        url = os.environ.get("ANYCLOUD_DATABASE_URL") or f"sqlite:///{root / 'anycloud.db'}"
        return cls(home=root, database_url=url,
                   concurrency=os.environ.get("ANYCLOUD_CONCURRENCY") or None,
                   concurrency_per_credential=os.environ.get(
                       "ANYCLOUD_CONCURRENCY_PER_CREDENTIAL") or None,
                   stack_timeout=os.environ.get("ANYCLOUD_STACK_TIMEOUT") or None,
                   drift_interval=os.environ.get("ANYCLOUD_DRIFT_INTERVAL") or None)

    def drift_seconds(self, engine: str) -> float:
        """The periodic drift check's interval for pools run by ``engine``: the variable
        when set, else the engine's default (hourly on Pulumi, off on the mock engine)."""
        if self.drift_interval is None:
            return DEFAULT_DRIFT_INTERVAL.get(engine, 0.0)
        try:
            seconds = float(self.drift_interval)
        except ValueError:
            raise InvalidInput("ANYCLOUD_DRIFT_INTERVAL", self.drift_interval,
                               "must be a number of seconds (0: off)") from None
        if seconds < 0:
            raise InvalidInput("ANYCLOUD_DRIFT_INTERVAL", self.drift_interval,
                               "must be a number of seconds (0: off)")
        return seconds

    def limits(self, overall: int | None = None, per_credential: int | None = None) -> Limits:
        """The pass's bounds: an option given wins over the variable, the variable over the
        default (8 in all, 4 per credential)."""

        def pick(option: int | None, flag: str, raw: str | None, var: str,
                 default: int) -> tuple[int, str]:
            if option is not None:
                return option, flag
            if raw is None:
                return default, var
            try:
                return int(raw), var
            except ValueError:
                raise InvalidInput(var, raw, "must be a whole number of at least 1") from None

        total, total_field = pick(overall, "--concurrency", self.concurrency,
                                  "ANYCLOUD_CONCURRENCY", DEFAULT_OVERALL)
        each, each_field = pick(per_credential, "--per-credential",
                                self.concurrency_per_credential,
                                "ANYCLOUD_CONCURRENCY_PER_CREDENTIAL", DEFAULT_PER_CREDENTIAL)
        timeout = DEFAULT_STACK_TIMEOUT
        if self.stack_timeout is not None:
            try:
                timeout = float(self.stack_timeout)
            except ValueError:
                raise InvalidInput("ANYCLOUD_STACK_TIMEOUT", self.stack_timeout,
                                   "must be a number of seconds above 0") from None
        return Limits(per_credential=each, overall=total, fields=(each_field, total_field),
                      stack_timeout=timeout)


# The mass-failure brake (automation.reconciler.brake): a cluster is braked when at least
# ANYCLOUD_BRAKE_MIN of its VMs are failing and they are more than ANYCLOUD_BRAKE_FRACTION of
# its VMs across its pools.
DEFAULT_BRAKE_FRACTION = 0.40
DEFAULT_BRAKE_MIN = 3


@dataclass(frozen=True)
class BrakeLimits:
    fraction: float = DEFAULT_BRAKE_FRACTION  # braked above this share of failing VMs ...
    min_failing: int = DEFAULT_BRAKE_MIN  # ... and at this many failing VMs or more

    def __post_init__(self) -> None:
        if isinstance(self.fraction, bool) or not 0 <= self.fraction < 1:
            raise InvalidInput("ANYCLOUD_BRAKE_FRACTION", self.fraction,
                               "must be a number from 0 up to (not including) 1")
        if (not isinstance(self.min_failing, int) or isinstance(self.min_failing, bool)
                or self.min_failing < 1):
            raise InvalidInput("ANYCLOUD_BRAKE_MIN", self.min_failing,
                               "must be a whole number of at least 1")

    @classmethod
    def from_env(cls, env: dict[str, str] | os._Environ[str] | None = None) -> BrakeLimits:
        """ANYCLOUD_BRAKE_FRACTION (default 0.40) and ANYCLOUD_BRAKE_MIN (default 3)."""
        env = os.environ if env is None else env
        raw_fraction = env.get("ANYCLOUD_BRAKE_FRACTION") or None
        raw_min = env.get("ANYCLOUD_BRAKE_MIN") or None
        try:
            fraction = DEFAULT_BRAKE_FRACTION if raw_fraction is None else float(raw_fraction)
        except ValueError:
            raise InvalidInput("ANYCLOUD_BRAKE_FRACTION", raw_fraction,
                               "must be a number from 0 up to (not including) 1") from None
        try:
            least = DEFAULT_BRAKE_MIN if raw_min is None else int(raw_min)
        except ValueError:
            raise InvalidInput("ANYCLOUD_BRAKE_MIN", raw_min,
                               "must be a whole number of at least 1") from None
        return cls(fraction=fraction, min_failing=least)
