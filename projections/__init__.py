"""Folds over Context events: the visible context, the batch stack, the history."""
