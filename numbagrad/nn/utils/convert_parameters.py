"""Flattening parameters into one vector and back (``torch.nn.utils.convert_parameters``)."""
from ...tensor import Tensor

__all__ = ["parameters_to_vector", "vector_to_parameters"]


def _check_same_device(param, device):
    if device is None:
        return param.device
    if param.device != device:
        raise TypeError("Found two parameters on different devices, this is currently not supported "
                        f"({device} and {param.device}).")
    return device


def parameters_to_vector(parameters):
    """One 1-D tensor of every parameter's values, flattened and concatenated in order;
    differentiable (the gradient flows back to each parameter)."""
    from ... import ops
    device = None
    flat = []
    for p in parameters:
        device = _check_same_device(p, device)
        flat.append(ops.reshape(p, -1))
    if not flat:
        raise ValueError("parameters_to_vector: expected at least one parameter, got none")
    return ops.cat(flat)


def vector_to_parameters(vec, parameters):
    """Slice the 1-D tensor ``vec`` into the parameters, in order: each ``p.array`` becomes a
    view of its slice of ``vec`` (shares memory with it, as in PyTorch; not recorded by
    autograd)."""
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected Tensor, but got: {type(vec).__name__}")
    if vec.ndim != 1:
        raise ValueError(f"vector_to_parameters: expected a 1-D vector, got shape {tuple(vec.shape)}")
    device = None
    pointer = 0
    params = list(parameters)
    total = sum(p.numel() for p in params)
    if total > vec.numel():  # a longer vector is accepted (its tail unused), as in PyTorch
        raise RuntimeError(f"vector_to_parameters: the vector has {vec.numel()} elements but the parameters "
                           f"need {total}")
    for p in params:
        device = _check_same_device(p, device)
        n = p.numel()
        p.array = vec.array[pointer:pointer + n].reshape(p.shape)
        pointer += n
