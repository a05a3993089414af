"""Functional forms of less common layers (filled in by a session); ``nn.functional`` exports ``__all__``."""
__all__ = []
