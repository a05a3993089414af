"""``sync_batch_norm``: batch norm whose statistics are those of the global batch, over
every rank of a ``numbagrad.distributed`` group (``torch.nn.SyncBatchNorm``'s op).

Forward: each rank computes its per-channel mean and biased variance with the batch-norm
stats kernel (two passes, stable), turns them into float64 sums ``m * mean`` and
``m * (var + mean^2)`` plus its count ``m``, and one ``Allreduce`` of those ``2C + 1``
numbers gives the global mean and variance; the input is normalised with them by the
batch-norm forward kernel, and the running statistics move with the global ones (the
unbiased variance uses the global count). Backward: the batch-norm backward kernel gives
the local ``sum g`` and ``sum g * xhat``; one ``Allreduce`` of those ``2C`` numbers gives
their global sums, from which

    dx = w * invstd * (g - sum(g) / M - xhat * sum(g * xhat) / M)      (M: global count)

The weight and bias gradients returned are the local sums, as in torch: DDP's averaging
then makes them the global batch's.
"""
import numpy as np

from ..autograd.function import Function
from ..backend import backend_of
from ..distributed.collectives import allreduce_array
from ._util import cast_back
from .normalization import (_affine, _nc_input, _ncl, _stats, batch_norm_grads, batch_norm_out,
                            batch_norm_returns, batch_stats)

__all__ = ["sync_batch_norm"]


class SyncBatchNormFn(Function):
    """Batch norm of (N, C, *) with the statistics of all ranks' batches (see the module docstring)."""

    @staticmethod
    def forward(ctx, x, w, b, rm, rv, momentum, eps, comm):
        be = backend_of(x)
        dt = x.dtype
        x3 = _ncl(be, x)
        C = x3.shape[1]
        mean, var, m = batch_stats(be, x3)
        sums = np.zeros(2 * C + 1, np.float64)
        if m:
            mu = be.to_numpy(mean).astype(np.float64)
            sums[:C] = m * mu
            sums[C:2 * C] = m * (be.to_numpy(var) + mu * mu)
        sums[2 * C] = m
        allreduce_array(comm, sums, "sum")
        M = sums[2 * C]
        if M <= 1:
            raise ValueError(f"SyncBatchNorm: expected more than 1 value per channel over all ranks when "
                             f"training, got {int(M)} (this rank's input {tuple(x.shape)})")
        gmean = sums[:C] / M
        gvar = np.maximum(sums[C:2 * C] / M - gmean * gmean, 0.0)
        mom = float(momentum)
        if rm is not None:
            np.copyto(rm, be.asarray(be.to_numpy(rm) * (1.0 - mom) + gmean * mom), casting="unsafe")
        if rv is not None:
            np.copyto(rv, be.asarray(be.to_numpy(rv) * (1.0 - mom) + gvar * (M / (M - 1)) * mom), casting="unsafe")
        mean = be.asarray(gmean.astype(dt))
        invstd = be.asarray((1.0 / np.sqrt(gvar + eps)).astype(dt))
        ctx.M, ctx.comm = M, comm
        return batch_norm_out(ctx, be, x, x3, mean, invstd, w, b)

    @staticmethod
    def backward(ctx, g):
        be = backend_of(g)
        x, mean, invstd, wk = ctx.saved_tensors
        dt = x.dtype
        # with fixed statistics the kernel gives dx = w * invstd * g and the local sums
        # db = sum g, dw = sum g * xhat
        dx, dw, db, x3 = batch_norm_grads(ctx, g, False)
        C = x3.shape[1]
        sums = np.concatenate([be.to_numpy(db), be.to_numpy(dw)]).astype(np.float64)
        allreduce_array(ctx.comm, sums, "sum")
        M = ctx.M
        inv = be.to_numpy(invstd).astype(np.float64)
        a = (be.to_numpy(wk).astype(np.float64) if wk.shape[0] else 1.0) * inv
        k = sums[C:] * inv / M                     # sum(g * xhat) * invstd / M
        mu = be.to_numpy(mean).astype(np.float64)
        # dx = a * g - a * k * x + a * (k * mean - sum(g) / M), the first term already in dx
        dx += x3 * be.asarray((-a * k).astype(dt).reshape(1, C, 1))
        dx += be.asarray((a * (k * mu - sums[:C] / M)).astype(dt).reshape(1, C, 1))
        return batch_norm_returns(ctx, x, dx, dw, db)


def sync_batch_norm(input, running_mean, running_var, weight, bias, momentum, eps, comm):
    """Training-mode batch norm with the global batch's statistics over the communicator
    ``comm`` (see the module docstring); ``running_mean``/``running_var`` (or None) move in place."""
    x = _nc_input(input, "SyncBatchNorm")
    C = x.shape[1]
    rm, rv = _stats(running_mean, running_var, C, "SyncBatchNorm", x)
    if eps <= 0.0:
        raise ValueError(f"SyncBatchNorm: eps must be positive during training, but got {eps}")
    x, back, w, b = _affine(x, weight, bias, (C,), "SyncBatchNorm")
    y = SyncBatchNormFn.apply(x, w, b, None if rm is None else rm.array, None if rv is None else rv.array,
                              float(momentum), float(eps), comm)
    for t in (rm, rv):
        if t is not None:
            t._bump_version()
    return cast_back(y, back)
