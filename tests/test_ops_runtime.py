"""rules/dispatch.dl over the torch 2.13 wheel's own YAML vs that wheel's runtime dispatcher."""

from __future__ import annotations

import collections
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def derived(torch_wheel, tmp_path_factory):
    from torchtalk import api

    db = tmp_path_factory.mktemp("wheel") / "wheel.duckdb"
    api.index(Path(torch_wheel.__file__).parent, db=db)
    rows = api.eval_program(ROOT / "rules/dispatch.dl", db=db, outputs=["dispatch_registered"])["dispatch_registered"]
    con = api.open_db(db=db)
    ops = {r[0] for r in con.execute("select op from op").fetchall()}
    con.close()
    by_key = collections.defaultdict(set)
    for op, key, _ in rows:
        by_key[key].add(op)
    return by_key, ops


def runtime(torch, key: str) -> set[str]:
    return {n[6:] for n in torch._C._dispatch_get_registrations_for_dispatch_key(key) if n.startswith("aten::")}


def registered_from(torch, op: str, key: str) -> str:
    for line in torch._C._dispatch_dump(f"aten::{op}").splitlines():
        if line.split(":", 1)[0].replace("[alias]", "") == key:
            return re.search(r"registered at (\S+?):\d+", line).group(1)
    raise AssertionError(f"{op} has no {key} kernel")


@pytest.mark.wheel
@pytest.mark.parametrize("key", ["CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional"])
def test_composite_explicit_keys_match_exactly(torch_wheel, derived, key):
    by_key, _ = derived
    assert by_key[key] == runtime(torch_wheel, key)


@pytest.mark.wheel
@pytest.mark.parametrize("key", ["CPU", "CompositeImplicitAutograd"])
def test_backend_keys_miss_only_ops_defined_outside_the_yaml(torch_wheel, derived, key):
    by_key, ops = derived
    rt = runtime(torch_wheel, key)
    assert by_key[key] <= rt  # precision 1.0
    missing = rt - by_key[key]
    assert missing and not (missing & ops)  # every miss is an op the yaml does not declare


@pytest.mark.wheel
def test_meta_misses_only_python_registrations(torch_wheel, derived):
    by_key, _ = derived
    rt = runtime(torch_wheel, "Meta")
    assert by_key["Meta"] <= rt
    where = {registered_from(torch_wheel, op, "Meta") for op in rt - by_key["Meta"]}
    assert {w.rsplit("/", 1)[-1] for w in where} == {"_meta_registrations.py"}
