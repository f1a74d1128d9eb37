"""rules/dispatch.dl on small hand-written fact files: one case per codegen rule."""

from __future__ import annotations

from pathlib import Path

import pytest

from torchtalk import api

ROOT = Path(__file__).resolve().parents[1]
NF = "native_functions.yaml"
FACTS = {
    "op": [
        ("foo.out", "foo", "out", "foo.out(Tensor self, *, Tensor(a!) out) -> Tensor(a!)", NF, 1),
        ("foo", "foo", "", "foo(Tensor self) -> Tensor", NF, 5),
        ("foo_", "foo_", "", "foo_(Tensor(a!) self) -> Tensor(a!)", NF, 9),
        ("bar_", "bar_", "", "bar_(Tensor(a!) self) -> Tensor(a!)", NF, 12),
        ("baz_", "baz_", "", "baz_(Tensor(a!) self) -> Tensor(a!)", NF, 15),
        ("dec", "dec", "", "dec(Tensor self) -> Tensor", NF, 18),
        ("dec_core", "dec_core", "", "dec_core(Tensor self) -> Tensor", NF, 21),
        ("view_me", "view_me", "", "view_me(Tensor(a) self) -> Tensor(a)", NF, 24),
        ("pyop", "pyop", "", "pyop(Tensor self) -> Tensor", NF, 27),
        ("clone", "clone", "", "clone(Tensor self) -> Tensor", NF, 30),
    ],
    "dispatch": [
        ("foo.out", "CPU", "foo_out_cpu", NF, 3),
        ("foo.out", "MkldnnCPU", "foo_mkldnn", NF, 4),
        ("bar_", "CPU", "bar_cpu_", NF, 13),
        ("baz_", "CompositeExplicitAutograd", "baz_", NF, 16),
        ("dec", "CompositeImplicitAutograd", "dec", NF, 18),
        ("dec_core", "CompositeImplicitAutograd", "dec_core", NF, 21),
        ("view_me", "CPU", "view_me", NF, 25),
        ("pyop", "CPU", "pyop_cpu", NF, 28),
        ("clone", "CompositeExplicitAutograd", "clone", NF, 31),
    ],
    "structured": [("foo.out", NF, 2)],
    "structured_delegate": [("foo", "foo.out", NF, 6), ("foo_", "foo.out", NF, 10)],
    "autogen": [("bar_", "bar.out", NF, 14), ("dec", "dec.out", NF, 19), ("dec_core", "dec_core.out", NF, 22)],
    "op_tag": [("dec_core", "core")],
    "decomp": [("pyop", "torch._refs.pyop", "torch/_refs/__init__.py", 3),
               ("dec", "torch._refs.dec", "torch/_refs/__init__.py", 9),
               ("view_me", "torch._refs.view_me", "torch/_refs/__init__.py", 12),
               ("foo", "torch._inductor.decomposition.foo", "torch/_inductor/decomposition.py", 4)],
    "py_op_impl": [("torch._meta_registrations.meta_clone", "clone", "register_meta", "torch/_meta_registrations.py", 7)],
}


def write_facts(d: Path) -> Path:
    from torchtalk.index import load_schema

    for rel in load_schema().columns:
        rows = FACTS.get(rel, [])
        (d / f"{rel}.facts").write_text("".join("\t".join(map(str, r)) + "\n" for r in rows))
    return d


@pytest.fixture(scope="module")
def registered(tmp_path_factory) -> set[tuple]:
    d = write_facts(tmp_path_factory.mktemp("facts"))
    rows = api.eval_program(ROOT / "rules/dispatch.dl", facts_dir=d, outputs=["dispatch_registered"])
    return set(rows["dispatch_registered"])


def test_structured_kernel_rules(registered):
    structured = {r for r in registered if r[0] in ("foo.out", "foo", "foo_")}
    assert structured == {
        ("foo.out", "CPU", "yaml"), ("foo.out", "MkldnnCPU", "yaml"), ("foo.out", "Meta", "structured_meta"),
        # delegates: the out op's structured-key kernels (MkldnnCPU is not one), Meta, CEANF
        ("foo", "CPU", "structured_delegate"), ("foo", "Meta", "structured_meta"),
        ("foo", "CompositeExplicitAutogradNonFunctional", "structured_functional"),
        ("foo_", "CPU", "structured_delegate"), ("foo_", "Meta", "structured_meta"),
        ("foo_", "CompositeExplicitAutogradNonFunctional", "structured_functional"),
    }


def test_autogen_and_inplace_meta(registered):
    assert ("bar.out", "CompositeExplicitAutograd", "autogen") in registered
    assert ("dec_core.out", "CompositeExplicitAutograd", "autogen") in registered  # core: generated anyway
    assert not any(r[0] == "dec.out" for r in registered)  # decomposing op: nothing generated
    assert ("bar_", "Meta", "inplace_meta") in registered
    assert not any(r[0] == "baz_" and r[1] == "Meta" for r in registered)  # has a composite kernel


def test_python_meta(registered):
    meta = {r[0] for r in registered if r[2] == "python_meta"}
    # dec: CompositeImplicitAutograd; view_me: a view; clone: skipped by activate_meta;
    # foo: registered in torch/_inductor, which `import torch` does not run
    assert meta == {"pyop"}
