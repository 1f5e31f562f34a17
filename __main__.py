"""`python -m ctxstore`: the command line."""

from ctxstore.adapters.cli.app import main

main()
