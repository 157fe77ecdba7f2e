"""Corpus sources: fetching Debian packages and reading their texts, the user's parallel files,
cleaning and deduplicating pairs, and writing them into the atomic corpus cache."""
