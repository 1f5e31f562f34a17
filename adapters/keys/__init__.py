"""Keys at rest: the key-encryption key (kek.py), the data keys' vault (vault*.py) and the
per-context cipher the stored states go through (cipher.py); docs/explanation/security.md."""
