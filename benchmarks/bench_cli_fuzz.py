"""The CLI fuzz (tests/automation/test_cli_fuzz.py) as a measure: per command, the cases
generated and the crashes and rule violations found, beside the counts before the error
boundary (recorded from the same fuzz, 20 cases per command, at commit 4cafbd7).

    python benchmarks/bench_cli_fuzz.py [--examples 20] [--runs 3] [--smoke]

Cases are derandomized: every run generates the same ones, so the counts do not vary; the
time per case is the median of the runs, beside the baseline `cluster list` measured in
the same run (its ratio says which commands are expensive to fuzz). Exit 1 when any crash
or violation is found (the goal is 0).

--smoke: one case per command (the baseline's included), one run.

Everything is written in temporary directories, Hypothesis's own storage included; its table
of the characters UTF-8 encodes is written there first (``_utf8_intervals``: a constant that
Hypothesis would otherwise compute, ~2 s of CPU charged to the first command drawing text).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks import _cli
from benchmarks._table import print_table

# The same fuzz run before this boundary existed (commit 4cafbd7, 20 cases per command):
# crashes (an exception escaped or a traceback) + violations (wrong exit, bad JSON, a
# refusal that wrote), per command; commands not listed had none.
BEFORE_EXAMPLES = 20
BASELINE = "(baseline) cluster list"
BEFORE: dict[str, tuple[int, int]] = {
    "agent-pool validate": (1, 0),  # -f with a NUL byte: ValueError from click.Path's stat
    "cluster preview": (2, 0),  # ClusterUnavailable escaped (an unreachable cluster)
    "cluster register": (5, 0),  # --kubeconfig with a NUL byte or a too-long name
}


def main() -> int:
    def options(p: argparse.ArgumentParser) -> None:
        p.add_argument("--examples", type=int, default=BEFORE_EXAMPLES,
                       help="cases generated per command")
        p.add_argument("--runs", type=int, default=3, help="runs (median of the time)")

    args = _cli.parse(__doc__, options=options)
    if args.smoke:
        args.examples, args.runs = 1, 1
    with tempfile.TemporaryDirectory(prefix="bench-fuzz-") as store:
        # Hypothesis keeps a cache of constants in .hypothesis/ of the working directory.
        os.environ["HYPOTHESIS_STORAGE_DIRECTORY"] = store
        _utf8_intervals()
        return fuzz_all(args)


def _utf8_intervals() -> None:
    """Write Hypothesis's cache of the characters UTF-8 encodes into the new storage.

    ``st.text()`` draws from them; with no cache Hypothesis encodes and decodes each of the
    1.1 million code points (~2 s of CPU, charged to the first command whose case draws a
    text) and stores the result. That result is a constant: every code point but the
    surrogates (U+D800-U+DFFF), all round-tripping. Written here in Hypothesis's own file
    (its path from ``charmap_file``; a version that names it otherwise recomputes it)."""
    import gzip
    import json

    from hypothesis.internal.charmap import charmap_file

    path = Path(charmap_file("codec-v2-utf-8"))
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.GzipFile(path, "wb", mtime=1) as out:
        out.write(json.dumps([[[0, 0xD7FF], [0xE000, sys.maxunicode]], []]).encode())


def fuzz_all(args: argparse.Namespace) -> int:
    from tests.automation import test_cli_fuzz as fuzz

    per_case: dict[str, list[float]] = {}
    last: dict[str, fuzz.Outcome] = {}
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory() as tmp:
            seed = fuzz._seed(Path(tmp) / "seed")
            scratch = Path(tmp) / "cases"
            scratch.mkdir()
            fuzz.OUTCOMES.clear()
            baseline = dict(fuzz.leaves())["cluster list"]
            for name, command in [(BASELINE, baseline), *fuzz.FUZZED]:
                # The baseline's cases run `cluster list` (the command's own name: run_case
                # splits it into the argv), counted apart from the fuzzed command's.
                leaf = "cluster list" if name == BASELINE else name
                outcome = fuzz.fuzz(leaf, command, seed, scratch, args.examples)
                if name == BASELINE:
                    fuzz.OUTCOMES.pop(leaf)
                per_case.setdefault(name, []).append(outcome.seconds / max(outcome.cases, 1))
                last[name] = outcome
    base = statistics.median(per_case[BASELINE])
    rows = []
    for name, o in last.items():
        before = BEFORE.get(name, (0, 0)) if args.examples == BEFORE_EXAMPLES else None
        med = statistics.median(per_case[name])
        rows.append((name, o.cases, "-" if before is None else before[0], o.crashes,
                     "-" if before is None else before[1], o.violations,
                     f"{med * 1000:.1f}", f"{med / base:.2f}"))
    total = [o for n, o in last.items() if n != BASELINE]
    rows.append(("TOTAL", sum(o.cases for o in total),
                 sum(c for c, _ in BEFORE.values()) if args.examples == BEFORE_EXAMPLES else "-",
                 sum(o.crashes for o in total),
                 sum(v for _, v in BEFORE.values()) if args.examples == BEFORE_EXAMPLES else "-",
                 sum(o.violations for o in total), "", ""))
    print_table(f"CLI fuzz: {args.examples} cases per command, median of {args.runs} runs "
                f"(ms/case; ratio to `cluster list`)",
                ["command", "cases", "crashes before", "crashes", "violations before",
                 "violations", "ms/case", "ratio"], rows)
    for name, o in last.items():
        for failure in o.failures:
            print(f"\n{name}: {failure}")
    bad = sum(o.crashes + o.violations for o in total)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
