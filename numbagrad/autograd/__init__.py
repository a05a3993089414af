"""Reverse-mode automatic differentiation: ``Function``, the engine, grad modes."""
from .function import Function  # noqa: F401
from .engine import backward, grad  # noqa: F401
from .grad_mode import (no_grad, enable_grad, set_grad_enabled, inference_mode,  # noqa: F401
                        is_grad_enabled, is_inference_mode_enabled)
from .anomaly import detect_anomaly, set_detect_anomaly, is_anomaly_enabled  # noqa: F401
from .gradcheck import gradcheck  # noqa: F401
