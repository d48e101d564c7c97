"""tools/build.py: sets built side by side, longest first, one failure costing no other;
some programs alone; a build traced."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from automation.devcluster import binaries
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
        if tool_set.name == "pulumi":
            raise build.BuildError("`go build` of pulumi failed: no space left on device")
        return {"set": tool_set.name, "buildSeconds": 1.0, "reused": False}

    monkeypatch.setattr(build, "build", fake_build)
    rows = build.build_all(list(build.TOOL_SETS), "go1.26", jobs=2)

    # Rows in the sets' own order, whatever order they finished in.
    assert [r["set"] for r in rows] == [t.name for t in build.TOOL_SETS]
    # The two longest first, together.
    assert set(started[:2]) == {"pulumi-kubernetes", "kubernetes"}
    assert not both_running.broken
    [failed] = [r for r in rows if r.get("error")]
    assert failed["set"] == "pulumi" and "no space left" in str(failed["error"])
    assert all("error" not in r for r in rows if r["set"] != "pulumi")


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


def test_every_program_anycloud_looks_up_is_built() -> None:
    built = {b for t in build.TOOL_SETS for b in t.binaries}
    assert set(binaries.TOOLS) <= built


def test_only_builds_some_programs_with_what_they_need_and_nothing_else() -> None:
    [kwok] = build.pick(["kwok"])
    assert kwok.name == "kubernetes-kwok" and kwok.binaries == {"kwok": "sigs.k8s.io/kwok/cmd/kwok"}
    assert kwok.share and {b for b, _, _ in kwok.share} == {"kwok"}
    assert kwok.versions == {"kwok": build.KWOK}
    [helm] = build.pick(["helm"])
    assert helm.share == () and helm.ldflags == build.BY_NAME["kubernetes"].ldflags
    # A part gets its own cache folder: a full build is never mistaken for it, nor it for one.
    assert len({build.fingerprint(t, "go1.26")
                for t in (kwok, helm, build.BY_NAME["kubernetes"])}) == 3
    # A set asked for whole is the set itself (the image builds the Pulumi CLI this way).
    assert build.pick(["pulumi"]) == [build.BY_NAME["pulumi"]]
    assert build.pick([]) == list(build.TOOL_SETS)
    assert [t.name for t in build.pick(["helm", "pulumi-resource-kubernetes"])] == [
        "kubernetes-helm", "pulumi-kubernetes"]


def test_only_an_unknown_program_exits_2_naming_it_and_what_exists(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert build.main(["--only", "pulumi", "--only", "kubelet", "--locate"]) == 2
    err = capsys.readouterr().err
    assert "--only: no tool set builds kubelet; the programs built here are etcd," in err


def test_a_part_of_a_set_builds_from_the_sets_module_and_is_traced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tools = tmp_path / "tools"
    for program in ("hello", "bye"):
        (tools / "greet" / "cmd" / program).mkdir(parents=True)
        (tools / "greet" / "cmd" / program / "main.go").write_text(
            'package main\n\nimport "os"\n\nfunc main() { os.Exit(0) }\n')
    (tools / "greet" / "go.mod").write_text("module anycloud.local/tools/greet\n\ngo 1.26\n")
    monkeypatch.setattr(build, "TOOLS_DIR", tools)
    monkeypatch.setenv("ANYCLOUD_TOOLS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ANYCLOUD_GO_TRACE_DIR", str(tmp_path / "traces"))
    greet = build.ToolSet(name="greet", binaries={"hello": "./cmd/hello", "bye": "./cmd/bye"})
    hello = greet.only(["hello"])
    before = build.fingerprint(hello, "go1.26")
    (tools / "greet" / "go.sum").write_text("")
    # Its cache folder follows the set's module files, as the whole set's does.
    assert build.fingerprint(hello, "go1.26") != before

    row = build.build(hello, build.go_version())

    built = Path(str(row["binaries"]["hello"])).parent  # type: ignore[index]
    assert sorted(p.name for p in built.iterdir()) == ["hello"]
    events = json.loads((tmp_path / "traces" / "greet-hello.json").read_text())
    actions = {e["name"] for e in events if e["name"].startswith("Executing action")}
    assert "Executing action (link anycloud.local/tools/greet/cmd/hello)" in actions
    assert any(a.startswith("Executing action (build os") for a in actions)
