"""`python -m dg.bench …`: see dg/bench/cli.py."""

from dg.bench.cli import main

main()
