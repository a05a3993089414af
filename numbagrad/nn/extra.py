"""Less common layers and losses (filled in by a session)."""
__all__ = []
