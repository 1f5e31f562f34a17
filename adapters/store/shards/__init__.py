"""Contexts spread over several PostgreSQL servers (shards): placement, routing, the merged
audit and moving a context (docs/how-to/scaling.md)."""
