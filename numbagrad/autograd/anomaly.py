"""Anomaly detection: names the op whose backward produced NaN or inf.

While it is on, every graph node records the stack of the forward call that made it,
and the engine checks each gradient a backward function returns.
"""
import threading


class _AnomalyState(threading.local):
    enabled = False


_anomaly = _AnomalyState()


def is_anomaly_enabled():
    """Whether anomaly detection (``detect_anomaly``/``set_detect_anomaly``) is on."""
    return _anomaly.enabled


class detect_anomaly:
    """Context manager turning anomaly detection on (PyTorch's ``autograd.detect_anomaly``).

    Example
    -------
    >>> import numbagrad as ng
    >>> x = ng.tensor([0.0], requires_grad=True)
    >>> with ng.autograd.detect_anomaly():
    ...     y = ng.sqrt(x) * 0.0
    ...     y.sum().backward()   # doctest: +SKIP
    RuntimeError: Function 'SqrtBackward' returned nan values in its 0th output. ...
    """

    def __init__(self, check_nan=True):
        self.check_nan = check_nan

    def __enter__(self):
        self._prev = _anomaly.enabled
        _anomaly.enabled = self.check_nan
        return self

    def __exit__(self, *exc):
        _anomaly.enabled = self._prev
        return False


class set_detect_anomaly(detect_anomaly):
    """Function/context-manager form: ``set_detect_anomaly(True)``."""

    def __init__(self, mode):
        super().__init__(mode)
        self._prev = _anomaly.enabled
        _anomaly.enabled = bool(mode)

    def __enter__(self):
        return self
