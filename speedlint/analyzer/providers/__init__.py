"""Torch-aware facts computed once per file and shared by every rule (see `FileContext`)."""
