"""Padding layers (filled in by a session)."""
__all__ = []
