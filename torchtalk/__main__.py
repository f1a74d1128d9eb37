from torchtalk.cli import run

run()
