"""``Parameter``: a Tensor that a :class:`~numbagrad.nn.Module` registers as learnable."""
import numpy as np

from .. import _dtype
from ..tensor import Tensor


class Parameter(Tensor):
    """A leaf Tensor that requires grad and is registered by the Module it is assigned to
    (``torch.nn.Parameter``).

    ``Parameter(t)`` shares the array of the Tensor (or NumPy array) ``t``; it is an
    ordinary :class:`~numbagrad.Tensor` in every op (``isinstance(p, Tensor)`` holds).

    Optimizers may move ``p.array`` into a view of one flat per-group buffer (the
    parameter arena, see :mod:`numbagrad.optim.optimizer`); code should therefore
    update parameters in place (``load_state_dict``, ``with no_grad(): p.copy_(...)``)
    rather than rebind ``p.array``. Rebinding still works: the optimizer notices and
    rebuilds its arena on the next step.
    """

    __slots__ = ()

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = np.empty((0,), _dtype.get_default_dtype())
        Tensor.__init__(self, data)
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    def __deepcopy__(self, memo):
        key = id(self)
        if key in memo:
            return memo[key]
        # As torch's Parameter: the copy starts without a gradient.
        out = Parameter(self.array.copy(), self.requires_grad)
        memo[key] = out
        return out

    def __reduce_ex__(self, protocol):
        return (_rebuild_parameter, (self.array, self.requires_grad))


def _rebuild_parameter(data, requires_grad):
    return Parameter(data, requires_grad)


def empty_parameter(owner, shape, dtype):
    """An uninitialised Parameter of ``shape`` for the constructor of module ``owner``; a
    negative size raises PyTorch's error naming the module (NumPy's would name nothing)."""
    shape = tuple(shape)
    bad = [s for s in shape if s < 0]
    if bad:
        raise RuntimeError(f"{type(owner).__name__}: Trying to create tensor with negative dimension {bad[0]}: "
                           f"{list(shape)}")
    return Parameter(np.empty(shape, dtype))


def weight_and_bias(owner, weight_shape, bias_shape, dtype):
    """Give module ``owner`` an uninitialised ``weight`` Parameter of ``weight_shape`` and a
    ``bias`` of ``bias_shape``; ``bias_shape`` None declares the bias absent (``bias=False``)."""
    owner.weight = empty_parameter(owner, weight_shape, dtype)
    owner.register_parameter("bias", None if bias_shape is None else empty_parameter(owner, bias_shape, dtype))


def reset_and_place(owner, device):
    """A layer constructor's last step: ``owner.reset_parameters()``, then ``owner.to(device)``
    where a device was given."""
    owner.reset_parameters()
    if device is not None:
        owner.to(device)


def factory_dtype(device=None, dtype=None):
    """The floating dtype a layer creates its parameters in (``dtype`` or the default), after
    checking that ``device`` exists: a layer built with ``device="cuda"`` where there is no
    GPU raises the backend's one clear error before allocating anything."""
    from .. import _dtype
    dt = _dtype.as_dtype(dtype) or _dtype.get_default_dtype()
    if device is not None:
        from ..device import device as _device
        if _device(device).type != "cpu":
            from ..backend import backend_for_device
            backend_for_device(device)  # raises a clear error where there is no such device
    return dt
