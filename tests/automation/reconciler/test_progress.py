"""The stall rule (``reconciler.progress``): acting passes that change nothing are counted,
and only many of them over a long enough time make an error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import given
from hypothesis import strategies as st

from automation.reconciler import progress as p

T0 = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
M = timedelta(minutes=1)
RELEASING = p.mark("deleting", False, [("at-1", "releasing")])
RELEASED = p.mark("deleting", False, [("at-1", "released")])


def run(marks: list[tuple[str, bool]], step: timedelta = M) -> list[p.Progress]:
    out, now, cur = [], T0, p.Progress(None, None)
    for mark, acting in marks:
        cur = p.step(cur, mark, now, acting=acting)
        out.append(cur)
        now += step
    return out


def test_the_mark_is_what_progress_changes() -> None:
    assert RELEASING != RELEASED
    assert p.mark("ready", False, [("b", "running"), ("a", "running")]) == p.mark(
        "ready", False, [("a", "running"), ("b", "running")])  # order does not matter
    assert p.mark("deleting", False, []) != p.mark("deleting", True, [])


def test_stalled_only_after_enough_passes_and_enough_time() -> None:
    passes = run([(RELEASING, True)] * (p.STALL_PASSES + 1))
    assert [p.stalled(x, T0 + i * M) for i, x in enumerate(passes)] == (
        [False] * p.STALL_PASSES + [True])
    # As many passes in a few seconds: a fast loop is not yet a stall.
    quick = run([(RELEASING, True)] * (p.STALL_PASSES + 1), step=timedelta(seconds=1))
    assert not p.stalled(quick[-1], T0 + p.STALL_PASSES * timedelta(seconds=1))


@given(st.lists(st.tuples(st.sampled_from([RELEASING, RELEASED]), st.booleans()),
                max_size=40))
def test_any_change_or_rest_starts_the_count_over(marks: list[tuple[str, bool]]) -> None:
    passes = run(marks)
    for i, (x, (mark, acting)) in enumerate(zip(passes, marks, strict=True)):
        changed = i == 0 or marks[i - 1][0] != mark
        if changed or not acting:
            assert x.passes == 0
        else:
            assert x.passes == passes[i - 1].passes + 1
        assert x.mark == mark


def test_the_error_names_what_it_waits_for_and_what_to_do() -> None:
    stuck = p.Progress(RELEASING, T0, 12)
    text = p.describe("np-1", stuck, releasing=["at-1", "at-2"], starting=[],
                      repeated=["ApplyStack", "RemoveNode", "RemoveNode"])
    assert "no progress in 12 passes since 2026-06-01 12:00:00Z" in text
    assert "at-1, at-2" in text and "anycloud node-pool adopt np-1" in text
    assert "ApplyStack, RemoveNode x2" in text
    other = p.describe("np-1", stuck, releasing=[], starting=["at-3"], repeated=[])
    assert "at-3 to start" in other and "node-pool history np-1" in other
