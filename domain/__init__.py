"""The pure core of ctxstore: messages, the Context aggregate and its invariants."""
