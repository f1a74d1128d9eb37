"""Picking one chain per row from the shortest-chain edges (Note [Chains]):
the smallest step by file, line and name at each node, never leaving the
walk's device."""

from __future__ import annotations

from torchtalk.query.chains import Chain, Edges, Step, down_walk, short, up_walk


def _up(src, ss, dst, ds, left, file, line, how="call", seed="s"):
    return (seed, "", src, ss, dst, ds, left, how, "typed", file, line)


def test_ties_take_the_smallest_file_and_line():
    edges = Edges([
        _up("a", "*", "b1", "*", 1, "x.cpp", 20),
        _up("a", "*", "b2", "*", 1, "x.cpp", 10),
        _up("b1", "*", "s", "*", 0, "a.cpp", 1),
        _up("b2", "*", "s", "*", 0, "z.cpp", 1),
    ])
    assert [s.dst for s in up_walk(edges, "s", "a", "*")] == ["b2", "s"]


def test_a_chain_keeps_its_device():
    edges = Edges([
        _up("a", "CPU", "b", "CPU", 1, "x.cpp", 5),
        _up("b", "CPU", "s", "CPU", 0, "y.cpp", 9, "stub_register"),
        _up("b", "CUDA", "s", "CUDA", 0, "a.cu", 1, "<<<>>>"),  # smaller, but another device
    ])
    steps = up_walk(edges, "s", "a", "CPU")
    assert [(s.kind, s.file) for s in steps] == [("call", "x.cpp"), ("stub_register", "y.cpp")]


def test_down_walks_back_from_the_end_and_reads_forward():
    rows = [("e", "CUDA", "e", "CUDA", "h", "CUDA", 1, "call", "typed", "k.cu", 3),
            ("e", "CUDA", "h", "CUDA", "g", "CUDA", 2, "call", "guess", "k.cu", 7)]
    steps = down_walk(Edges(rows), ("e", "CUDA"), "g", "CUDA")
    assert [(s.src, s.dst) for s in steps] == [("e", "h"), ("h", "g")]
    assert str(Chain(steps)) == "e -call k.cu:3-> h -call? k.cu:7-> g"


def test_compact_names_drop_the_namespace_and_private_parts():
    assert short("at::native::(anonymous:aten/x.cu)::host_softmax") == "host_softmax"
    assert short("at::native::(static:aten/y.cpp)::addmm_impl_cpu_") == "addmm_impl_cpu_"
    assert short("at::native::cpublas::gemm") == "cpublas::gemm"
    assert Chain((Step("a", "b", "call", "f.cpp", 1),)).as_json() == [
        {"src": "a", "dst": "b", "kind": "call", "file": "f.cpp", "line": 1, "res": "typed"}]


def test_a_tie_on_file_and_line_is_broken_by_name_whatever_the_row_order():
    rows = [("e", "*", "e", "*", "p2", "*", 1, "call", "typed", "k.cpp", 3),
            ("e", "*", "e", "*", "p1", "*", 1, "call", "typed", "k.cpp", 3),
            ("e", "*", "p2", "*", "g", "*", 2, "aten", "typed", "q.cpp", 45),
            ("e", "*", "p1", "*", "g", "*", 2, "aten", "typed", "q.cpp", 45)]
    for order in (rows, rows[::-1]):
        steps = down_walk(Edges(order), ("e", "*"), "g", "*")
        assert [s.dst for s in steps] == ["p1", "g"]
