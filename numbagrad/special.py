"""``torch.special`` (filled in by ops/special_fns.py's author)."""
__all__ = []
