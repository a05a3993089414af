"""Runnable examples; ``python -m numbagrad`` runs :mod:`numbagrad.examples.train_digits`."""
