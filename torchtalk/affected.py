"""`torchtalk affected`: the tests to run for a diff, ranked, with their chains.

Pipeline: unified diff → changed lines (torchtalk.changes) → changed
functions, Python defs, tests and YAML entries → `to_run` of rules/changes.dl
(through `affected` for C++/CUDA: callers up to the ops, then the tests that
cover them) → one ranked row per test.

Note [Ranking]: a test ranks by `rank` (rules/changes.dl `to_run`): its
distance from a change (fewest steps: a changed test itself is 0, a test of a
changed op 1, ...) plus the penalty of its link to what it covers (Note [Test
ranking] in rules/ranking.dl: named for it, calls it, own entry, through a
caller, sweep; other suites after core ones), the reason shown as `why`;
then by distance, then the more (changed entity, impacted op) pairs reach it
— a test that covers many of the impacted ops exercises the change more
ways — then by name.

Example:
    >>> r = affected(con, root, diff_text)
    >>> r.tests[0].test
    'test/test_linalg.py::TestLinalg::test_addmm'
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from torchtalk.changes import Changes, changed_entities, changed_lines


@dataclass(frozen=True)
class Step:
    """One link of a chain: what, and where its evidence is."""

    what: str
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.what} ({self.file}:{self.line})" if self.file else self.what


@dataclass(frozen=True)
class TestToRun:
    test: str
    rank: int  # depth + the penalty of its link (Note [Ranking])
    why: str  # the link's kind ("named for it", "sweep, other suite", ...)
    depth: int
    reached_by: int  # how many (changed entity, op) pairs reach it
    chain: tuple[Step, ...]  # from a changed entity to the test

    def to_json(self) -> dict:
        return {"test": self.test, "rank": self.rank, "why": self.why, "depth": self.depth,
                "reached_by": self.reached_by,
                "chain": [{"what": s.what, "file": s.file, "line": s.line} for s in self.chain]}


@dataclass(frozen=True)
class AffectedReport:
    changes: Changes
    tests: tuple[TestToRun, ...]

    def to_json(self) -> dict:
        ch = self.changes
        return {
            "changed": {"functions": _evid(ch.fns), "python": _evid(ch.pys), "tests": _evid(ch.tests),
                        "ops": _evid(ch.ops), "files": list(ch.files), "unmapped": list(ch.unmapped)},
            "tests": [t.to_json() for t in self.tests],
        }


def _evid(d: dict[str, tuple[str, int]]) -> list[dict]:
    return [{"name": k, "file": f, "line": ln} for k, (f, ln) in sorted(d.items())]


def affected(con, root: Path, diff_text: str, *, depth: int = 6, origin: str = "<diff>") -> AffectedReport:
    """Rank the tests to run for `diff_text` against the fact DB `con` of the
    tree at `root`. An empty or blank diff, or a bad `depth`, is an InputError."""
    from torchtalk.errors import InputError
    from torchtalk.query.run import check_depth

    if not (diff_text or "").strip():
        raise InputError(f"the diff from {origin} is empty: no changed lines to follow",
                         hint="pipe a unified diff, or give --patch FILE or --diff REV")
    check_depth(depth, "--depth")
    ch = changed_entities(con, root, changed_lines(diff_text, origin))
    if not (ch.fns or ch.pys or ch.tests or ch.ops):
        return AffectedReport(ch, ())
    from torchtalk.datalog import evaluate
    from torchtalk.query.library import load_library

    facts = {
        "affected_arg": [(f,) for f in ch.fns], "affected_depth": [(depth,)],
        "changed_op": [(o,) for o in ch.ops], "changed_py": [(p,) for p in ch.pys],
        "changed_test": [(t,) for t in ch.tests],
    }
    rows = evaluate(load_library(), con, outputs=["to_run"], facts=facts)["to_run"]
    return AffectedReport(ch, _rank(con, ch, rows))


def _rank(con, ch: Changes, rows) -> tuple[TestToRun, ...]:
    best: dict[str, tuple] = {}
    reach: dict[str, set[str]] = {}
    for test, entity, via, depth, rank, why, file, line in rows:
        reach.setdefault(test, set()).add((entity, via))
        key = (rank, depth, entity, via, file, line, why)
        if test not in best or key < best[test]:
            best[test] = key
    op_loc = _op_locations(con, {b[3] for b in best.values()})
    out = []
    for test, (rank, depth, entity, via, file, line, why) in best.items():
        chain = [_entity_step(ch, entity)]
        if via != entity and via in op_loc:
            chain.append(Step(f"op {via}" + (f", {depth - 1} call(s) above" if entity in ch.fns else ""),
                              *op_loc[via]))
        elif via != entity:  # a module or optimizer class that runs the changed code
            chain.append(Step(f"class {via}, {depth - 1} call(s) above", "", 0))
        chain.append(Step(f"test {test}", file, line))
        out.append(TestToRun(test, rank, why, depth, len(reach[test]), tuple(chain)))
    out.sort(key=lambda t: (t.rank, t.depth, -t.reached_by, t.test))
    return tuple(out)


def _entity_step(ch: Changes, entity: str) -> Step:
    for label, table in (("changed function", ch.fns), ("changed Python", ch.pys),
                         ("changed test", ch.tests), ("changed op", ch.ops)):
        if entity in table:
            return Step(f"{label} {entity}", *table[entity])
    return Step(entity, "", 0)


def _op_locations(con, ops: set[str]) -> dict[str, tuple[str, int]]:
    if not ops:
        return {}
    rows = con.execute("select op, file, min(line) from op where op in (select unnest(?)) group by op, file",
                       [sorted(ops)]).fetchall()
    return {op: (f, ln) for op, f, ln in rows}
