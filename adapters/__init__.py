"""Adapters that touch the world: storage, configuration, the CLI."""
