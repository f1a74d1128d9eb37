"""An ordered pipeline of program transforms, which can show the program
between passes (STYLE practice 8, as Soufflé's `--show=transformed-datalog`).

A stage is what a pass reads and returns: the program, the facts given to
the engine, and where stored relations are read from. Each pass is a
`(name, function)`; `dump(name, stage)` is called after each one.

Example:
    >>> stage = run_pipeline(Stage(program, facts), [("prune", my_prune)], dump=print_stage)  # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from torchtalk.datalog import ast as A


@dataclass(frozen=True)
class Stage:
    """The program as a pass leaves it, with the facts given to the engine
    and the stored relations (relation -> table) read as inputs."""

    program: A.Program
    facts: dict[str, list[tuple]] = field(default_factory=dict)
    tables: dict[str, str] = field(default_factory=dict)


Pass = tuple[str, Callable[[Stage], Stage]]


def run_pipeline(stage: Stage, passes: Iterable[Pass],
                 dump: Callable[[str, Stage], None] | None = None) -> Stage:
    """`stage` through each pass in order; `dump(name, stage)` after each."""
    if dump is not None:
        dump("input", stage)
    for name, apply in passes:
        stage = apply(stage)
        if dump is not None:
            dump(name, stage)
    return stage


def dump_to(directory: Path) -> Callable[[str, Stage], None]:
    """A `dump` writing `NN-<pass>.dl` into `directory`: the program as valid
    Soufflé text, preceded by a comment with its size, the given facts' row
    counts and the stored relations it reads."""
    directory.mkdir(parents=True, exist_ok=True)
    count = [0]

    def write(name: str, stage: Stage) -> None:
        p = stage.program
        head = [f"// after pass '{name}': {len(p.decls)} relations, {len(p.rules)} rules"]
        head += [f"// given: {rel} ({len(rows)} rows)" for rel, rows in sorted(stage.facts.items())]
        head += [f"// stored: {rel} read from {table}" for rel, table in sorted(stage.tables.items())]
        (directory / f"{count[0]:02d}-{name}.dl").write_text("\n".join(head) + "\n" + str(p), encoding="utf-8")
        count[0] += 1

    return write
