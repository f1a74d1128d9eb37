"""Extractors: one module per source kind, each writing rows of `facts/schema.dl`.

Note [Extractor contract]: an extractor reads files of a PyTorch tree and calls
`sink.add(relation, *values)` once per fact row; values are `str` for symbol
columns and `int` for number columns, in the column order of the relation's
`.decl`. Every row from source carries `file` (POSIX path relative to the tree
root) and `line` (1-based). Problems that must not stop indexing (a file that
does not parse) go to `sink.warn(file, line, message)`, which reports and
counts them. The sink checks each row against the schema (unknown relation,
wrong arity or type is an error). Extractors import nothing from `torchtalk`.
"""
