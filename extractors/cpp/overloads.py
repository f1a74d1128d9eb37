"""Which C++ names are overloaded, and the id of each overload.

Note [Overload ids] (extractors/cpp/names.py) says how an overload is named;
this module decides, over every file's definitions at once, which names get
the suffix, for the fast tier (extractors/cpp/resolve.py renames the defs
before resolving, and maps each resolved callee to its overloads) and the
compiler tier (extractors/clang: its edges name every function with its
suffix, and `Overloads.final` drops the suffix of a name that is not
overloaded).

Example:
    >>> ov = Overloads.of([scan_file("a.cpp", b"void f(int){} void f(int, int){} void g(){}")])
    >>> sorted(ov.ids), ov.pick("f", 1)
    (['f(int)', 'f(int, int)'], (('f(int)',), True))
    >>> ov = Overloads.of([scan_file("a.cpp", b"void f(int){} void f(float*){}")])
    >>> ov.pick("f", 1), ov.by_types(("f(float*)", "f(int)"), ("double",))
    ((('f(float*)', 'f(int)'), False), (('f(int)',), True))
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import replace

from extractors.cpp.argtypes import param_types, pick_typed
from extractors.cpp.names import split_sig
from extractors.cpp.scan import FileFacts


class Overloads:
    """plain id -> {overload id: (fewest arguments, most or -1, its template
    type parameters, its classes' (FileFacts.sigs))} of the names defined
    with more than one parameter list."""

    def __init__(self, table: dict[str, dict[str, tuple]]) -> None:
        self.table = table
        self.ids = {i: plain for plain, ov in table.items() for i in ov}

    @classmethod
    def of(cls, facts: Iterable[FileFacts]) -> Overloads:
        """The overloaded names of the definitions in `facts` (unrenamed)."""
        sigs: dict[str, dict[str, tuple]] = defaultdict(dict)
        for f in facts:
            for (qual, _n, _l, _fl), sig in zip(f.defs, f.sigs or ((),) * len(f.defs), strict=True):
                if sig:
                    sigs[qual].setdefault(qual + sig[0], (*sig[1:3], *(sig[3:5] if len(sig) > 4 else ((), ()))))
        return cls({q: ov for q, ov in sigs.items() if len(ov) > 1})

    def patched(self, before: Iterable[FileFacts], after: Iterable[FileFacts],
                defined_in: Callable[[str], Iterable[str]],
                facts_of: Callable[[list[str]], Iterable[FileFacts]]) -> Overloads:
        """The Overloads of the tree where the files of `before` are now
        `after` (unrenamed FileFacts): those of the names they define, before
        or after, computed again from the files that define them now
        (`defined_in(name)`; `facts_of(files)`: their FileFacts), in the
        files' order as `of` reads them; the others' as they were. -> self
        when no name's overloads changed (Note [Index patched] in resolve.py)."""
        quals = {d[0] for f in (*before, *after) for d in f.defs}
        files = sorted({x for q in quals for x in defined_in(q)})
        now = Overloads.of(f for f in facts_of(files) if f is not None).table
        table = None
        for q in quals:
            got, had = now.get(q), self.table.get(q)
            if (got and list(got.items())) != (had and list(had.items())):  # in order: the rows' order
                table = table if table is not None else dict(self.table)
                if got:
                    table[q] = got
                else:
                    table.pop(q, None)
        return self if table is None else Overloads(table)

    def rename(self, f: FileFacts) -> FileFacts:
        """`f` with each overload's def named by its id (a def whose
        parameter list is unknown keeps the plain name)."""
        if not f.sigs or self.table.keys().isdisjoint(d[0] for d in f.defs):
            return f
        defs = tuple((qual + sig[0], n, line, fl) if sig and qual in self.table else (qual, n, line, fl)
                     for (qual, n, line, fl), sig in zip(f.defs, f.sigs, strict=True))
        return replace(f, defs=defs)

    def pick(self, plain: str, nargs: int | None) -> tuple[tuple[str, ...], bool]:
        """(the ids a call of `plain` with `nargs` arguments (None: unknown)
        may reach, whether that is exactly one by the count): `plain` itself
        when it is not overloaded; the overloads that take `nargs` arguments,
        or all of them when none or the count is unknown."""
        ov = self.table.get(plain)
        if ov is None:
            return (plain,), True
        if nargs is not None:
            fit = tuple(sorted(i for i, (lo, hi, *_t) in ov.items() if lo <= nargs and (hi < 0 or nargs <= hi)))
            if fit:
                return fit, len(fit) == 1
        return tuple(sorted(ov)), False

    def by_types(self, ids: tuple[str, ...], args: tuple[str, ...]) -> tuple[tuple[str, ...], bool]:
        """(the overloads among `ids` a call with argument types `args` may
        reach, whether that is exactly one by the types: Note [Typed overloads])."""
        cands = []
        for i in ids:
            plain = self.ids.get(i)
            if plain is None:  # not an overload: nothing to choose by
                return ids, False
            cands.append((i, param_types(i[len(plain):]), *self.table[plain][i][2:4]))
        return pick_typed(cands, args)

    def final(self, fn: str) -> str:
        """A compiler-tier name (always with its suffix) as the fact DB
        spells it: the suffix kept only when the name is overloaded."""
        plain, sig = split_sig(fn)
        return fn if not sig or fn in self.ids or plain in self.table else plain
