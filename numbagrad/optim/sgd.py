"""Stochastic gradient descent, each step one fused kernel over every parameter of a
group (``_sgd_step_cpu`` in ``numbagrad/kernels/cpu/optim.py``). Numerically PyTorch's
single-tensor SGD: weight decay added to the gradient, momentum buffer initialised to
the first gradient then ``momentum*buf + (1-dampening)*g``, Nesterov's look-ahead,
``maximize``."""
from .optimizer import Optimizer, _check_hyper, required  # noqa: F401

__all__ = ["SGD"]


class SGD(Optimizer):
    """SGD with optional momentum (``torch.optim.SGD``; heavy-ball momentum after Polyak,
    1964, "Some methods of speeding up the convergence of iteration methods"; the Nesterov
    form as in Sutskever et al., 2013, "On the importance of initialization and momentum in
    deep learning").

    Per parameter ``p`` with gradient ``g`` (``-g`` when maximizing), at its step ``t``::

        g = g + weight_decay * p
        if momentum != 0:
            b = g                                   if t == 1     # state['momentum_buffer']
            b = momentum * b + (1 - dampening) * g  otherwise
            g = g + momentum * b                    if nesterov
            g = b                                   otherwise
        p = p - lr * g

    Parameters
    ----------
    lr : float, default 1e-3
    momentum : float, default 0
    dampening : float, default 0
    weight_decay : float, default 0
    nesterov : bool, default False (needs momentum > 0 and dampening 0)
    maximize : bool, default False

    >>> import numbagrad as ng
    >>> w = ng.tensor([1.0, -2.0], requires_grad=True)
    >>> opt = ng.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> (w ** 2).sum().backward()        # grad 2w = [2, -4]
    >>> opt.step()                       # first step: buffer = grad, w -= lr * buffer
    >>> [round(v, 4) for v in w.tolist()]
    [0.8, -1.6]
    """

    _flag_key = "momentum_buffer"

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        _check_hyper("SGD", nan_ok=True, lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        _check_hyper("SGD", differentiable=differentiable)
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _state_keys(self, group):
        return ("momentum_buffer",) if group["momentum"] != 0 else ()

    def _update_bucket(self, h, b, t):
        """One SGD update of bucket ``b`` (``h``: the group's hyperparameters)."""
        group = h.group
        momentum = float(group["momentum"])
        use_m = momentum != 0.0
        b.be.kernel("optim", "sgd_step")(
            b.param, b.grad, b.bufs["momentum_buffer"] if use_m else b.grad, b.tables, b.flags,
            (t(-h.lr), t(momentum), t(1.0 - float(group["dampening"])), t(h.wd), t(h.sign), use_m,
             bool(group["nesterov"])))
