"""Model providers: tokenizers and summarizers."""
