"""``torch.distributions`` (filled in by a session)."""
__all__ = []
