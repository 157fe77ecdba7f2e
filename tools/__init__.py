"""Maintainers' commands (`python -m tools.NAME`): they write what the product reads, and the
product never imports them."""
