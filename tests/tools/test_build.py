"""tools/build.py: sets built side by side, longest first, one failure costing no other."""

from __future__ import annotations

import threading
import time

import pytest

from tools import build


def test_sets_build_side_by_side_longest_first_and_a_failure_spares_the_others(
        monkeypatch: pytest.MonkeyPatch) -> None:
    started: list[str] = []
    # The two longest sets must be running at the same time to get past this.
    both_running = threading.Barrier(2, timeout=30)

    def fake_build(tool_set: build.ToolSet, go: str, *, force: bool = False
                   ) -> dict[str, object]:
        started.append(tool_set.name)
        if tool_set.name in ("pulumi-kubernetes", "kubernetes"):
            both_running.wait()
        if tool_set.name == "helm":
            raise build.BuildError("`go build` of helm failed: no space left on device")
        return {"set": tool_set.name, "buildSeconds": 1.0, "reused": False}

    monkeypatch.setattr(build, "build", fake_build)
    rows = build.build_all(list(build.TOOL_SETS), "go1.26", jobs=2)

    # Rows in the sets' own order, whatever order they finished in.
    assert [r["set"] for r in rows] == [t.name for t in build.TOOL_SETS]
    # The two longest first, together.
    assert set(started[:2]) == {"pulumi-kubernetes", "kubernetes"}
    assert not both_running.broken
    [failed] = [r for r in rows if r.get("error")]
    assert failed["set"] == "helm" and "no space left" in str(failed["error"])
    assert all("error" not in r for r in rows if r["set"] != "helm")


def test_one_job_builds_one_set_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    running = 0
    most = 0

    def fake_build(tool_set: build.ToolSet, go: str, *, force: bool = False
                   ) -> dict[str, object]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        time.sleep(0.01)
        running -= 1
        return {"set": tool_set.name, "buildSeconds": 1.0, "reused": True}

    monkeypatch.setattr(build, "build", fake_build)
    build.build_all(list(build.TOOL_SETS), "go1.26", jobs=1)
    assert most == 1


def test_every_set_has_a_build_weight() -> None:
    # A set without one would be started last, whatever it costs.
    assert set(build.BUILD_WEIGHT) == set(build.BY_NAME)


@pytest.mark.parametrize("jobs", ["0", "-2", "two"])
def test_a_bad_jobs_count_exits_2_naming_it(jobs: str, capsys: pytest.CaptureFixture[str]
                                            ) -> None:
    with pytest.raises(SystemExit) as exited:
        build.main(["--jobs", jobs, "--locate"])
    assert exited.value.code == 2
    assert f"--jobs: '{jobs}': must be a whole number of at least 1" in capsys.readouterr().err
