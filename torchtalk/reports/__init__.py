"""Batch reports computed by rules and rendered as md, html, csv or json.

`coverage`: per dispatch key, which ATen ops have a kernel and what is
missing (rules/coverage.dl); with a backend package, the same for an
out-of-tree backend's op table (reports/backend_pkg.py).
"""
