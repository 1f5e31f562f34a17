"""`python -m ctxstore`: the command line."""

from ctxstore.adapters.cli.app import main

if __name__ == "__main__":  # (importing the module, as documentation tools do, runs nothing)
    main()
