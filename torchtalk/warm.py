"""Warming a watcher's layer memo before the first edit (Note [Warmed memo]).

Note [Warmed memo]: a watcher's updates are fast because each layer keeps
what it read in its memo (Note [Layer memo] in extractors/base.py): the C++
layer its state and Index, the python and tests layers their models. A
layer fills its memo when it runs. A watcher started on a tree indexed
before (the common case: `torchtalk index`, then `torchtalk watch`) starts
with an update that finds nothing changed and runs no layer, so the first
edit of each kind read everything from the caches: a `.py` body edit took
3.4 s where the same edit again took 0.7 s, a `.cpp` body edit 1.05 s
against 0.6 s (in-process, the real 2.6.0 tree). The warm-up runs each layer
the memo does not hold yet, under the DB's lock, as an update would: its
rows are written into a directory of its own and thrown away, the DB and
its facts dir untouched. What the layer keeps of its rows is labelled with
the generation the DB has of them (Note [Layer deltas]), so the next
update writes deltas from them; that holds only if they are the DB's rows,
which is checked, as an update finds what a layer changed
(`update.layer_deltas`). A layer whose rows differ (an edit made since
the update) is dropped from the memo again, and its cache writes are not
made (they would label its new rows as the DB's): the update that edit
starts runs it anyway. The watcher warms after its first update
and says so; an edit that comes meanwhile waits for it, no longer than it
would have taken to read the caches itself.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from torchtalk import store


def warm(source: str | Path, db: str | Path | None = None, layers: Iterable[str] | None = None, *,
         jobs: int | None = None, memo: dict) -> list[str]:
    """Run the chosen layers of the indexed tree at `source` that did not
    run with `memo` yet (an update keeps what they read there), so that it
    holds what they read (Note [Warmed memo]); -> the layers
    warmed. Nothing is warmed for a DB that is not indexed, nor for a layer
    whose inputs changed since (the next update runs it).

    Example:
        >>> memo = {}
        >>> warm("/work/src/pytorch-v2.6.0", memo=memo)
        ['ops', 'cpp', 'python', 'tests']
    """
    import importlib

    from torchtalk import index as ix
    from torchtalk import update

    src = store.resolve_source(source)
    db_path = Path(db).expanduser().absolute() if db is not None else store.default_db(src.root)
    schema = ix.load_schema()
    chosen, _notes = ix.select_layers(src, layers, False)
    done: list[str] = []
    with ix._locked(db_path):
        facts = store.facts_dir(db_path)
        prev = ix._previous_layers(db_path, facts, src.root)
        work = db_path.parent / f".{facts.name}.warm-{os.getpid()}"
        pending: list = []
        try:
            with ix._Progress(False) as bar:
                for layer in chosen:
                    meta = prev.get(layer.name)
                    if layer.name in memo or meta is None or meta.get("generation") is None:
                        continue
                    mod = importlib.import_module(layer.module)
                    stamp = ix._stamp(layer, mod, schema, src, facts, prev)
                    if meta.get("input_fingerprint") != stamp[0]:
                        continue
                    old, out = facts / "layers" / layer.name, work / layer.name
                    writes: list = []  # its cache writes: made only for rows found the DB's
                    try:
                        lr = ix._run_layer(src, db_path, schema, layer, mod, stamp, out, jobs, bar, previous=old,
                                           memo=memo.setdefault(layer.name, {}),
                                           ctx_extra={"later": writes.append}, generation=meta["generation"])
                        moved: update.Deltas = {}
                        update.layer_deltas(lr.sink, old, out, moved)
                        if not moved and hasattr(mod, "warm"):  # what its runs after an edit read besides
                            mod.warm(ix._layer_cache(db_path, layer.name), memo[layer.name])
                    except BaseException:  # what it kept may be labelled with rows it did not check
                        memo.pop(layer.name, None)
                        raise
                    if moved:  # not the DB's rows: the update that follows runs the layer anyway
                        memo.pop(layer.name, None)
                        continue
                    pending.extend(writes)
                    done.append(layer.name)
            ix._write_caches(pending, lambda _msg: None)
            if done:  # the update's copy of the DB, made as an update leaves one (Note [A copy made ahead])
                ix._copy_ahead(db_path, memo)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return done
