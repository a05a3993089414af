"""``torch.linalg`` (filled in by a session)."""
__all__ = []
