"""Storage: one module per backend, the codec of stored states, schema migrations."""
