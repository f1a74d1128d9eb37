"""Benchmark: "all callers of one function, transitively" on the embedded engine.

Runs the same question two ways in one process, on the same read-only fact DB:
  engine  a Datalog rule with a seed, through torchtalk.datalog.evaluate
          (check + compile + temp seed table + WITH RECURSIVE + fetch + cleanup)
  cte     a hand-written DuckDB WITH RECURSIVE query (the floor)
and prints the median times side by side, the ratio, the result count, and
the peak memory the runs added versus the fact DB file size.

    .venv/bin/python bench/engine.py                    # random 60K nodes / 139K edges (seeded)
    .venv/bin/python bench/engine.py --db facts.duckdb --seed-fn at::native::gemm
                                                        # a real fact DB (table `calls`)

Goals (issue 3): engine <= 50 ms and <= 2x the CTE; memory <= 2x the DB size.

Then, beside Soufflé (issue 14), where `souffle` is on PATH:
  whole processes on the same closure: `torchtalk eval` (embedded engine)
          vs `souffle` (interpreter) vs the `souffle -o` executable (compiled
          once, not timed), median time and peak memory of each process;
  named queries (with --named-db DB, or the default tree's DB): 10 queries
          in-process with the DB open, as users run them, on the embedded
          engine, on Soufflé interpreted and on Soufflé compiled (each query
          shape compiled once beforehand, not timed).

    .venv/bin/python bench/engine.py --named-db ~/.cache/torchtalk/db/<tree>.duckdb
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

RULES = """
.decl calls(caller: symbol, callee: symbol, file: symbol, line: number, via: symbol)
.input calls
.decl seed(fn: symbol)
.input seed
// every function that reaches a seed through calls
.decl caller_of(fn: symbol)
.output caller_of
caller_of(c) :- seed(f), calls(c, f, _, _, _).
caller_of(c) :- caller_of(f), calls(c, f, _, _, _).
"""

CTE = """
WITH RECURSIVE r(fn) AS (
  SELECT caller FROM calls WHERE callee = ?
  UNION
  SELECT c.caller FROM r JOIN calls c ON c.callee = r.fn
) SELECT fn FROM r
"""


def build_random(path: Path, nodes: int, edges: int, seed: int) -> None:
    """A random call graph: `edges` distinct (caller, callee) pairs over `nodes` functions."""
    import duckdb

    rng = random.Random(seed)
    pairs: set[tuple[int, int]] = set()
    while len(pairs) < edges:
        a, b = rng.randrange(nodes), rng.randrange(nodes)
        if a != b:
            pairs.add((a, b))
    rows = [(f"fn{a}", f"fn{b}", f"src/f{a % 997}.cpp", i + 1, "unique") for i, (a, b) in enumerate(sorted(pairs))]
    facts = path.with_suffix(".facts")  # Soufflé fact format: TSV, no header
    facts.write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))
    con = duckdb.connect(str(path))
    con.execute("CREATE TABLE calls (caller VARCHAR, callee VARCHAR, file VARCHAR, line BIGINT, via VARCHAR)")
    con.execute(
        "INSERT INTO calls SELECT * FROM read_csv(?, delim='\t', header=false, quote='', escape='', "
        "columns={'caller': 'VARCHAR', 'callee': 'VARCHAR', 'file': 'VARCHAR', 'line': 'BIGINT', 'via': 'VARCHAR'})",
        [str(facts)],
    )
    con.close()


def _rss_kib(field: str) -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def _connect(db: Path):
    """A read-only connection set up as the query layer's (torchtalk.store.tune_for_queries),
    for the engine and the hand-written CTE alike."""
    import duckdb

    from torchtalk.store import tune_for_queries

    con = duckdb.connect(str(db), read_only=True)
    tune_for_queries(con)
    return con


def memory(db: Path, seed_fn: str, mode: str) -> dict:
    """Peak memory one way adds (fresh process: imports and connection excluded)."""

    from torchtalk.datalog import check, evaluate, parse_text

    con = _connect(db)
    program = parse_text(RULES, "bench.dl")
    check(program)
    base = _rss_kib("VmRSS")
    if mode == "engine":
        n = len(evaluate(program, con, outputs=["caller_of"], facts={"seed": [(seed_fn,)]})["caller_of"])
    else:
        n = len(con.execute(CTE, [seed_fn]).fetchall())
    return {"mode": mode, "rows": n, "added_mib": (_rss_kib("VmHWM") - base) / 1024}


def measure(db: Path, seed_fn: str, runs: int) -> dict:
    """Run both ways `runs` times (alternating); report medians."""

    from torchtalk.datalog import check, evaluate, parse_text

    con = _connect(db)
    program = parse_text(RULES, "bench.dl")
    check(program)
    con.execute(CTE, [seed_fn]).fetchall()  # warm the DB pages once for both
    t_engine, t_cte, n_engine, n_cte = [], [], 0, 0
    for _ in range(runs):
        t0 = time.perf_counter()
        rows = evaluate(program, con, outputs=["caller_of"], facts={"seed": [(seed_fn,)]})["caller_of"]
        t_engine.append(time.perf_counter() - t0)
        n_engine = len(rows)
        t0 = time.perf_counter()
        cte_rows = con.execute(CTE, [seed_fn]).fetchall()
        t_cte.append(time.perf_counter() - t0)
        n_cte = len(cte_rows)
    same = sorted(rows) == sorted(cte_rows)
    return {
        "engine_ms": 1000 * statistics.median(t_engine),
        "cte_ms": 1000 * statistics.median(t_cte),
        "engine_min_ms": 1000 * min(t_engine),
        "cte_min_ms": 1000 * min(t_cte),
        "engine_rows": n_engine,
        "cte_rows": n_cte,
        "same_rows": same,
        "db_mib": db.stat().st_size / 2**20,
        "runs": runs,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--db", type=Path, help="a fact DB with table `calls` (default: build a random graph)")
    ap.add_argument("--seed-fn", help="the function whose callers to find (default: the most-called one)")
    ap.add_argument("--nodes", type=int, default=60_000)
    ap.add_argument("--edges", type=int, default=139_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--runs", type=int, default=15)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--named-db", type=Path, help="the fact DB for the named queries (default: the default tree's)")
    ap.add_argument("--named-runs", type=int, default=3)
    ap.add_argument("--process-runs", type=int, default=5)
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # internal: child process
    ap.add_argument("--memory", choices=["engine", "cte"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.measure and args.memory:
        print(json.dumps(memory(args.measure, args.seed_fn, args.memory)))
        return 0
    if args.measure:
        print(json.dumps(measure(args.measure, args.seed_fn, args.runs)))
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db
        if db is None:
            db = Path(tmp) / "graph.duckdb"
            t0 = time.perf_counter()
            build_random(db, args.nodes, args.edges, args.seed)
            print(f"built random graph: {args.nodes} nodes, {args.edges} edges in {time.perf_counter() - t0:.2f} s", file=sys.stderr)
        seed_fn = args.seed_fn or _default_seed(db)
        # measure in fresh processes, so building the graph does not count as peak memory
        child = [sys.executable, __file__, "--measure", str(db), "--seed-fn", seed_fn, "--runs", str(args.runs)]
        res = _child(child)
        res["engine_added_mib"] = _child([*child, "--memory", "engine"])["added_mib"]
        res["cte_added_mib"] = _child([*child, "--memory", "cte"])["added_mib"]
        if args.db is None:  # the peers read the TSV facts the random graph is built from
            res["processes"] = whole_process(db, seed_fn, args.process_runs)
    named_db = args.named_db or _default_named_db()
    res["named"] = named_queries(named_db, args.named_runs) if named_db else None
    res["seed_fn"] = seed_fn
    if args.json:
        print(json.dumps(res))
    else:
        _print(res)
        _print_peers(res.get("processes") or [], res["named"])
    ok = res["same_rows"] and res["engine_ms"] <= 50 and res["engine_ms"] <= 2 * res["cte_ms"]
    return 0 if ok else 1


PEER_RULES = RULES  # the same program for every engine

# Runs a command and prints its peak RSS (KiB). A process forked from this
# benchmark would count the benchmark's own memory as its peak (the kernel
# keeps the high-water mark across exec), so a small launcher forks it.
_LAUNCH = """
import os, sys
pid = os.fork()
if pid == 0:
    fd = os.open(os.devnull, os.O_WRONLY); os.dup2(fd, 1)
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
print(usage.ru_maxrss)
sys.exit(os.waitstatus_to_exitcode(status))
"""


def whole_process(db: Path, seed_fn: str, runs: int) -> list[dict]:
    """The closure as whole processes: torchtalk eval, souffle, compiled souffle."""
    import shutil

    from torchtalk.datalog.engines.souffle import compiled_program, compiler_path

    out = []
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        facts = tmp / "facts"
        facts.mkdir()
        shutil.copy(db.with_suffix(".facts"), facts / "calls.facts")
        (facts / "seed.facts").write_text(seed_fn + "\n")
        prog = tmp / "bench.dl"
        prog.write_text(PEER_RULES)
        ways = [("torchtalk eval", [sys.executable, "-m", "torchtalk", "eval", str(prog), "--facts", str(facts),
                                    "--out", str(tmp / "o1")])]
        interp = shutil.which("souffle")
        if interp:
            ways.append(("souffle", [interp, "-F", str(facts), "-D", str(tmp), str(prog)]))
        comp = compiler_path()
        if comp:
            exe = compiled_program(comp, prog)
            ways.append(("souffle compiled", [str(exe), "-F", str(facts), "-D", str(tmp)]))
        times: dict[str, list[float]] = {name: [] for name, _ in ways}
        peaks: dict[str, list[float]] = {name: [] for name, _ in ways}
        for _ in range(runs):  # the ways take turns, so a change in the machine's load hits each alike
            for name, cmd in ways:
                t0 = time.perf_counter()
                proc = subprocess.run([sys.executable, "-c", _LAUNCH, *cmd], cwd=str(ROOT),
                                      capture_output=True, text=True)
                times[name].append(time.perf_counter() - t0)
                if proc.returncode != 0:
                    raise SystemExit(f"{name} failed: {proc.stderr[-300:]}")
                peaks[name].append(int(proc.stdout.split()[-1]) / 1024)
        for name, _ in ways:
            rows = len((tmp / ("o1" if name == "torchtalk eval" else "") / "caller_of.csv").read_text().splitlines())
            out.append({"way": name, "s": statistics.median(times[name]), "peak_mib": max(peaks[name]), "rows": rows})
    return out


NAMED = [
    "kernels(topk)", "kernels(_softmax)", "impact(cpublas::gemm, depth=3)", "trace(add.Tensor)",
    "paths(softmax_warp_forward -> python)", "affected(cpublas::gemm)", "callers(gemm)",
    "callees(matmul)", "tests(softmax)", "coverage(MPS)",
]


def named_queries(db: Path, runs: int) -> list[dict]:
    """The 10 named queries in-process, DB open, on each engine available."""
    import shutil

    from torchtalk import api
    from torchtalk.datalog.engines.souffle import compiler_path

    engines = ["duckdb"] + (["souffle"] if shutil.which("souffle") else []) + (
        ["souffle-compiled"] if compiler_path() else [])
    con = api.open_db(db=db)
    out = []
    for text in NAMED:
        row = {"query": text}
        for engine in engines:
            first = api.query(text, con=con, all_matches=True, limit=None, engine=engine)  # compiles once
            times = []
            for _ in range(runs):
                t0 = time.perf_counter()
                r = api.query(text, con=con, all_matches=True, limit=None, engine=engine)
                times.append(time.perf_counter() - t0)
            assert r.rows == first.rows
            row[engine] = (statistics.median(times), r.total)
        out.append(row)
    con.close()
    return out


def _print_peers(procs: list[dict], named: list[dict] | None) -> None:
    if procs:
        print("\nthe same closure as whole processes (reading TSV facts, writing the answer; median):")
        for p in procs:
            print(f"  {p['way']:<18} {p['s']:7.3f} s   peak {p['peak_mib']:6.1f} MiB   {p['rows']:>8} rows")
        base = next((p for p in procs if p["way"] == "souffle"), None)
        if base:
            print(f"  torchtalk eval / souffle: {procs[0]['s'] / base['s']:.2f}x  (goal <= 1.5x)")
    if named:
        engines = [k for k in named[0] if k != "query"]
        print("\nnamed queries in-process, DB open (median ms; rows):")
        print("  " + f"{'query':<42}" + "".join(f"{e:>20}" for e in engines))
        for row in named:
            cells = "".join(f"{1000 * row[e][0]:14.1f} {row[e][1]:>5}" for e in engines)
            print(f"  {row['query']:<42}{cells}")
        fastest = sum(1 for row in named if min(engines, key=lambda e: row[e][0]) == "duckdb")
        print(f"  the embedded engine is fastest on {fastest} of {len(named)}")


def _child(cmd: list[str]) -> dict:
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def _default_named_db() -> Path | None:
    from torchtalk.errors import StoreError
    from torchtalk.store import resolve_db

    try:
        return Path(resolve_db())
    except StoreError:
        return None


def _default_seed(db: Path) -> str:
    """The most-called function (ties: smallest name), so the answer is large."""

    con = _connect(db)
    row = con.execute("SELECT callee FROM calls GROUP BY callee ORDER BY count(*) DESC, callee LIMIT 1").fetchone()
    con.close()
    return row[0]


def _print(r: dict) -> None:
    ratio = r["engine_ms"] / r["cte_ms"] if r["cte_ms"] else float("inf")
    print(f"all callers of {r['seed_fn']} (median of {r['runs']} runs, read-only DB)")
    print(f"  engine (Datalog rule)   {r['engine_ms']:8.1f} ms (min {r['engine_min_ms']:.1f})  {r['engine_rows']:>8} rows")
    print(f"  hand-written CTE        {r['cte_ms']:8.1f} ms (min {r['cte_min_ms']:.1f})  {r['cte_rows']:>8} rows")
    print(f"  ratio engine/CTE        {ratio:8.2f} x     (goal <= 2x; engine goal <= 50 ms)")
    print(f"  same rows               {r['same_rows']}")
    print(f"  peak memory added: engine {r['engine_added_mib']:.1f} MiB, CTE {r['cte_added_mib']:.1f} MiB;"
          f" fact DB file {r['db_mib']:.1f} MiB (goal: engine <= 2x DB)")


if __name__ == "__main__":
    sys.exit(main())
