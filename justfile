# TorchTalk tasks (the scripts work without `just` too).

setup:
    bash scripts/setup

test *ARGS:
    bash scripts/test {{ARGS}}

demo *SRC:
    bash scripts/demo {{SRC}}

bench:
    for b in bench/*.py; do .venv/bin/python "$b" || exit 1; done

lint:
    .venv/bin/ruff check torchtalk extractors tests bench
