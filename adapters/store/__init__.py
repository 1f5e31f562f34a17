"""The store: the facade every caller uses, and the modules it composes."""
