"""speedlint: find and fix the habits that make PyTorch training slow."""

__version__ = "0.1.0"
