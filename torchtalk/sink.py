"""The Sink (extractors/base.py) of one layer run of `torchtalk index`: rows
checked against facts/schema.dl and written as Soufflé fact files, or, for a
layer that writes what changed since its last run, those files edited
(Note [Layer deltas]).
"""

from __future__ import annotations

import os
from pathlib import Path

from extractors.base import file_identity
from torchtalk.errors import ExtractError, SrcLoc, did_you_mean


class LayerSink:
    """The Sink (extractors.base) of one layer run: checks rows against the
    schema (a torchtalk.index.Schema), writes `<dir>/<relation>.facts`,
    counts rows and warnings."""

    def __init__(self, layer, schema, out: Path, on_progress=None, previous: Path | None = None,
                 memo: dict | None = None, previous_counts: dict[str, int] | None = None) -> None:
        self.layer, self.schema, self.out = layer, schema, out
        self.memo = memo  # a long-running caller's, for the lines of the files it wrote (Note [Lines kept])
        self.allowed = set(layer.relations)
        self.counts: dict[str, int] = {}
        self.warnings: list[tuple[str, int, str]] = []
        self._files: dict[str, object] = {}
        self._on_progress = on_progress
        # Note [Layer deltas]: the layer's files of its last run, which `delta` edits
        self.previous = previous
        self.previous_counts = previous_counts or {}  # its rows per relation, as its layer.json says
        self.deltas: dict[str, tuple[list[str], list[str]]] | None = None  # set by the first `delta`

    def add(self, relation: str, *values: str | int) -> None:
        spec = self._files.get(relation)
        if spec is None:
            spec = self._open(relation)
        fh, cols, types = spec
        if tuple(map(type, values)) != types:  # Note [One row at a time]
            self._check_row(relation, values)
        line = "\t".join(map(str, values))
        if line.count("\t") != len(types) - 1 or "\n" in line or "\r" in line:
            line = "\t".join([_clean(v) for v in values])
        fh.write(line + "\n")
        self.counts[relation] += 1

    def add_rows(self, relation: str, rows) -> None:
        """`add` for each of `rows` (tuples), checked a column at a time and
        written at once; a bad row is reported as `add` reports it."""
        rows = rows if isinstance(rows, list) else list(rows)
        spec = self._files.get(relation)
        if spec is None:
            spec = self._open(relation)
        fh, cols, _types = spec
        n = len(cols)
        ok = all(len(r) == n for r in rows)
        for i, (_name, typ) in enumerate(cols):
            if not ok:
                break
            if typ == "number":
                ok = all(type(r[i]) is int for r in rows)
            else:
                ok = all(isinstance(r[i], str) for r in rows)
        if not ok:
            for r in rows:  # finds the bad row and raises
                self.add(relation, *r)
            return
        fh.writelines("\t".join([_clean(v) for v in r]) + "\n" for r in rows)
        self.counts[relation] += len(rows)

    def deltas_from_previous(self) -> None:
        """This run writes what changed since the layer's last run (`delta`);
        a relation it does not write keeps its rows."""
        if self.previous is None:
            raise ExtractError(f"layer {self.layer.name}: deltas without a previous run (ctx.previous is None)")
        if self.deltas is None:
            self.deltas = {}

    def delta(self, relation: str, removed, added) -> None:
        """The rows of `relation` as they were in the layer's last run (the
        files of generation `ctx.previous`), less `removed`, plus `added`
        (Note [Layer deltas]). Once a run calls it, a relation it does not
        write keeps its previous rows."""
        self.deltas_from_previous()
        if relation in self._files or relation in self.counts:
            raise ExtractError(f"layer {self.layer.name}: relation {relation!r} written twice")
        self._check_relation(relation)
        added = list(added)
        if not self._typed(relation, added):
            for r in added:  # finds the bad row and raises
                self._check_row(relation, r)
        gone = [_row_line(r) for r in removed]
        new = [_row_line(r) for r in added]
        kept = self._lines(self.previous / f"{relation}.facts")
        if gone:
            kept = _without(kept, gone, f"layer {self.layer.name}: relation {relation}")
        path = self.out / f"{relation}.facts"
        # the whole file, in 1 MiB writes: calls.facts (38 MB) in 8 KiB ones took 63 ms, 35 ms so
        with open(path, "w", encoding="utf-8", newline="\n", buffering=WRITE_BUFFER) as fh:
            fh.writelines(kept)
            fh.writelines(new)
        self.counts[relation] = len(kept) + len(new)
        if self.memo is not None:
            self.memo.setdefault(_LINES, {})[relation] = (file_identity(path), kept + new)
        if gone or new:
            self.deltas[relation] = (gone, new)

    def _lines(self, path: Path) -> list[str]:
        """The lines of fact file `path`: those this layer wrote there last,
        kept in the memo, while the file is the one written (Note [Lines kept])."""
        hit = (self.memo or {}).get(_LINES, {}).get(path.name[:-len(".facts")])
        if hit is not None and hit[0] is not None and hit[0] == file_identity(path):
            return hit[1]
        return fact_lines(path)

    def _typed(self, relation: str, rows: list) -> bool:
        cols = self.schema.columns[relation]
        n = len(cols)
        if not all(len(r) == n for r in rows):
            return False
        for i, (_name, typ) in enumerate(cols):
            ok = all(type(r[i]) is int for r in rows) if typ == "number" else all(isinstance(r[i], str) for r in rows)
            if not ok:
                return False
        return True

    def _check_row(self, relation: str, values) -> None:
        cols = self.schema.columns[relation]
        if len(values) != len(cols):
            self._fail(relation, f"takes {len(cols)} values ({', '.join(c for c, _ in cols)}), got {len(values)}",
                       values)
        for (name, typ), value in zip(cols, values, strict=True):
            if (type(value) is not int) if typ == "number" else not isinstance(value, str):
                self._fail(relation, f"column {name} is a {typ}, got {value!r}", values)

    def _check_relation(self, relation: str) -> None:
        if relation not in self.schema.columns:
            raise ExtractError(
                f"layer {self.layer.name}: unknown relation {relation!r} (not in facts/schema.dl)",
                hint=did_you_mean(relation, self.schema.columns),
            )
        if relation not in self.allowed:
            raise ExtractError(
                f"layer {self.layer.name}: writes relation {relation!r}, which extractors/layers.py does not list for it"
            )

    def _open(self, relation: str):
        self._check_relation(relation)
        if relation in self.counts:
            raise ExtractError(f"layer {self.layer.name}: relation {relation!r} written twice")
        fh = open(self.out / f"{relation}.facts", "w", encoding="utf-8", newline="\n")  # noqa: SIM115
        cols = self.schema.columns[relation]
        spec = self._files[relation] = (fh, cols, tuple(int if typ == "number" else str for _name, typ in cols))
        self.counts[relation] = 0
        return spec

    def _fail(self, relation: str, what: str, values: tuple) -> None:
        cols = [c for c, _ in self.schema.columns[relation]]
        loc = None
        if "file" in cols and "line" in cols and len(values) == len(cols):
            f, ln = values[cols.index("file")], values[cols.index("line")]
            loc = SrcLoc(f, ln) if isinstance(f, str) and type(ln) is int else None
        raise ExtractError(f"layer {self.layer.name}: relation {relation}: {what}", loc)

    def warn(self, file: str, line: int, message: str) -> None:
        self.warnings.append((file, line, " ".join(message.split())))

    def progress(self, advance: int = 1, total: int | None = None, what: str = "") -> None:
        if self._on_progress is not None:
            self._on_progress(advance, total, what)

    def close(self) -> None:
        for fh, _cols, _types in self._files.values():
            fh.close()
        if self.deltas is None:
            return
        for rel in self.allowed - self._files.keys() - self.counts.keys():  # kept as they were
            old = self.previous / f"{rel}.facts"
            if old.is_file():
                os.link(old, self.out / f"{rel}.facts")
                self.counts[rel] = self.previous_counts[rel] if rel in self.previous_counts else len(self._lines(old))

    def changed(self) -> bool:
        """Whether a delta run changed any row (a full run: always)."""
        return self.deltas is None or bool(self.deltas) or bool(self._files)


# Note [Lines kept]: a layer that writes deltas (the cpp layer, Note
# [Layer deltas]) edits its last fact files: calls.facts is 38 MB, 230,000
# lines, read again at each update (55 ms of a .cpp edit's). Run with a
# memo (`torchtalk watch`, Note [Layer memo]), the sink keeps the lines of
# each file it wrote, with the file's identity (inode, size, mtime): the
# file moves with its facts dir into place unchanged, so the next update
# finds it the same and takes the lines kept, and any other file (written
# by another process, or anew) is read. The memo holds one list of lines
# per relation: their text, about what the files take on disk. A relation
# left as it was is linked, and counted as the last run's layer.json says.
_LINES = "fact-lines"


# Note [One row at a time]: the ops layer and the compiler tier add their
# rows one `add` at a time (the python and tests layers, 265,000 rows,
# write theirs by `emit`, a relation at a time through `add_rows`). A row
# whose values are of its columns' types exactly (str, int: all but a str
# subclass) needs no check value by value, and one whose joined line holds
# a tab per column and no newline needs no value cleaned: two C-level tests per row, the value-by-value
# path kept for the others (it reports a bad row as before).
_CLEAN = str.maketrans({"\t": " ", "\n": " ", "\r": " "})  # fact files are TSV, one row per line


def _clean(value: str | int) -> str:
    if type(value) is int:
        return str(value)
    return value.translate(_CLEAN) if ("\t" in value or "\n" in value or "\r" in value) else value


def _row_line(row) -> str:
    """A row as its line of a fact file."""
    return "\t".join([_clean(v) for v in row]) + "\n"


def fact_lines(path: Path) -> list[str]:
    """The lines of a fact file (none when it does not exist)."""
    try:
        with open(path, encoding="utf-8", newline="\n") as fh:
            return fh.readlines()
    except FileNotFoundError:
        return []


# the buffer of a fact file a delta writes whole (one file at a time)
WRITE_BUFFER = 1 << 20


def _without(lines: list[str], gone: list[str], what: str) -> list[str]:
    """`lines` less one occurrence of each of `gone` (all must be there)."""
    from collections import Counter
    from itertools import filterfalse

    drop = set(gone)
    if len(drop) == len(gone):  # each line gone once and there once: a filter (C's loops)
        hits = list(filter(drop.__contains__, lines))
        if len(hits) == len(drop) == len(set(hits)):
            return list(filterfalse(drop.__contains__, lines))
    left = Counter(gone)
    out = []
    for line in lines:
        if left.get(line):
            left[line] -= 1
            continue
        out.append(line)
    missing = +left
    if missing:
        raise ExtractError(f"{what}: delta removes {sum(missing.values())} rows the last run did not have, "
                           f"e.g. {next(iter(missing)).rstrip()!r}")
    return out
