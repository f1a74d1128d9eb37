"""Hypothesis strategies: random small stratified programs and facts.

Relations are layered so every program is stratifiable: a rule of a layer-L
relation reads layers <= L positively (same layer: recursion, mutual
recursion) and layers < L under negation or inside aggregates.
"""

from __future__ import annotations

from hypothesis import strategies as st

EDB = {"e": 2, "f": 1}
LAYERS = [
    {"e": 2, "f": 1},
    {"p": 2, "r": 1},
    {"s": 2, "t": 1},
    {"u": 2},
]
VARS = ["x", "y", "z", "w"]
LAYER_OF = {rel: i for i, layer in enumerate(LAYERS) for rel in layer}
ARITY = {rel: a for layer in LAYERS for rel, a in layer.items()}


def header() -> str:
    lines = []
    for rel, arity in ARITY.items():
        cols = ", ".join(f"c{i}: number" for i in range(arity))
        lines.append(f".decl {rel}({cols})")
    lines.append(".input e, f")
    lines.append(".output " + ", ".join(r for r in ARITY if r not in EDB))
    return "\n".join(lines) + "\n"


@st.composite
def facts(draw) -> dict[str, set[tuple]]:
    vals = st.integers(0, 3)
    e = draw(st.sets(st.tuples(vals, vals), min_size=2, max_size=12))
    f = draw(st.sets(st.tuples(vals), min_size=1, max_size=3))
    return {"e": e, "f": f}


@st.composite
def programs(draw, *, negation=True, aggregates=True, arithmetic=True) -> str:
    """Program text: header, then 1-3 rules per derived relation."""
    rules = []
    for layer_no in range(1, len(LAYERS)):
        for head in LAYERS[layer_no]:
            for _ in range(draw(st.integers(1, 3))):
                rules.append(draw(_rule(head, layer_no, negation, aggregates, arithmetic)))
    return header() + "\n".join(rules) + "\n"


def _lower(layer_no: int, strict: bool) -> list[str]:
    return [r for r, lv in LAYER_OF.items() if (lv < layer_no if strict else lv <= layer_no)]


@st.composite
def _arg(draw, bound_only: list[str] | None = None) -> str:
    kind = draw(st.sampled_from(["var", "var", "var", "var", "var", "const", "wild", "wild"]))
    pool = VARS if bound_only is None else bound_only
    if kind == "var" and pool:
        return draw(st.sampled_from(pool))
    if kind == "wild":
        return "_"
    return str(draw(st.integers(0, 3)))


@st.composite
def _rule(draw, head: str, layer_no: int, negation: bool, aggregates: bool, arithmetic: bool) -> str:
    body, bound = [], []
    for _ in range(draw(st.integers(1, 3))):
        rel = draw(st.sampled_from(_lower(layer_no, strict=False)))
        args = [draw(_arg()) for _ in range(ARITY[rel])]
        body.append(f"{rel}({', '.join(args)})")
        bound += [a for a in args if a in VARS and a not in bound]
    values = list(bound)
    if arithmetic and bound and draw(st.integers(0, 2)) == 0:
        x = draw(st.sampled_from(bound))
        op = draw(st.sampled_from(["+", "-", "*", "/", "%"]))
        body.append(f"v = {x} {op} {draw(st.integers(1, 2))}")
        body += ["v >= 0", "v < 5"] if op == "-" else ["v < 5"]  # finite, even under recursion
        values.append("v")
    if bound and draw(st.integers(0, 2)) == 0:
        left = draw(st.sampled_from(bound))
        right = draw(st.sampled_from(bound + ["0", "1", "2", "3"]))
        body.append(f"{left} {draw(st.sampled_from(['=', '!=', '<', '<=', '>', '>=']))} {right}")
    if negation and layer_no > 0 and draw(st.integers(0, 2)) == 0:
        rel = draw(st.sampled_from(_lower(layer_no, strict=True)))
        args = [draw(_arg(bound_only=bound)) for _ in range(ARITY[rel])]
        body.append(f"!{rel}({', '.join(args)})")
    aggregated = aggregates and draw(st.integers(0, 2)) == 0
    if aggregated:
        body.append(draw(_aggregate(layer_no, bound)))
        values.append("n")
    head_args = [draw(st.sampled_from(values)) if values and draw(st.integers(0, 4)) else str(draw(st.integers(0, 3))) for _ in range(ARITY[head])]
    if aggregated:
        head_args[-1] = "n"  # so the aggregate's value shows in the output
    return f"{head}({', '.join(head_args)}) :- {', '.join(body)}."


@st.composite
def _aggregate(draw, layer_no: int, bound: list[str]) -> str:
    rel = draw(st.sampled_from(_lower(layer_no, strict=True)))
    func = draw(st.sampled_from(["count", "sum", "min", "max"]))
    args = []
    for i in range(ARITY[rel]):
        choice = draw(st.sampled_from(["local", "wild", "outer", "const"]))
        if i == 0 and func != "count":
            choice = "local"
        if choice == "outer" and bound:
            args.append(draw(st.sampled_from(bound)))
        elif choice == "local":
            args.append(f"k{i}")
        elif choice == "const":
            args.append(str(draw(st.integers(0, 3))))
        else:
            args.append("_")
    target = "" if func == "count" else f" k0{draw(st.sampled_from(['', ' + 1', ' * 2']))}"
    return f"n = {func}{target} : {{ {rel}({', '.join(args)}) }}"
