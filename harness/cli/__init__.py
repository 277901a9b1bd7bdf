"""The `rmq-harness` command line: main.py composes it; one module per command group."""
