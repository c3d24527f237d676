"""`python -m registry` is the `crashreg` command."""

from registry.cli import main

main()
