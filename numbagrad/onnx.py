"""``torch.onnx``. numbagrad does not export ONNX, and no later work plans to: an ONNX
model comes from PyTorch. numbagrad's ``state_dict()`` has PyTorch's keys and shapes, so
the weights load into the same model built with torch, which exports it."""

_EXPORT = ("numbagrad does not export ONNX models. Save the model's state_dict() instead: its keys and "
           "shapes are PyTorch's, so build the same model with torch, load the weights with "
           "model.load_state_dict({k: torch.from_numpy(v.numpy()) for k, v in ng_model.state_dict().items()}) "
           "and call torch.onnx.export on it")


def export(*args, **kwargs):
    """Raises ``NotImplementedError``: numbagrad does not export ONNX (see the module
    docstring for the route through PyTorch)."""
    raise NotImplementedError(_EXPORT)


def dynamo_export(*args, **kwargs):
    """Raises ``NotImplementedError``, as :func:`export`."""
    raise NotImplementedError(_EXPORT)


def is_in_onnx_export():
    """False: numbagrad never runs an ONNX export."""
    return False


__all__ = ["export", "dynamo_export", "is_in_onnx_export"]
