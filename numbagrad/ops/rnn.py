"""Recurrent layers: LSTM, GRU and Elman RNN (tanh/relu) cells and whole sequences.

Two levels, both device-generic (``be.matmul``-style NumPy calls that dispatch to BLAS
or the CUDA GEMM, and ``be.kernel("rnn", ...)`` for the fused cell steps of
``kernels/cpu/rnn.py`` / ``kernels/cuda/rnn.py``):

* **Cells** (``lstm_cell``, ``gru_cell``, ``rnn_tanh_cell``, ``rnn_relu_cell``; the
  signatures of ``torch.lstm_cell`` & co.) are one Function per step: two GEMMs and the
  fused cell kernel forward, the cell-backward kernel and four GEMMs backward. A user's
  Python loop over 1000 steps builds 1000 nodes; the engine is iterative, so backward
  has no recursion limit.
* **Layers** (``lstm``, ``gru``, ``rnn_tanh``, ``rnn_relu``; the signatures of
  ``torch.lstm`` & co., what ``nn.LSTM`` calls) run each (layer, direction) as ONE
  Function over the whole sequence, so the graph has O(layers) nodes whatever the
  length. Its forward computes the input projection of every time step with one GEMM
  (``X (T*B, in) @ W_ih^T``, biases folded in), then loops over time in Python: one GEMM
  ``h @ W_hh^T`` into a preallocated buffer and one fused cell kernel writing straight
  into the preallocated (T+1, B, H) hidden-state array, whose slice is the layer's
  output (no copy, no Tensor in the loop). Backward runs the loop in reverse with the
  cell-backward kernel and one GEMM ``dgates @ W_hh`` per step, storing every step's
  gate gradients; then ``dW_hh`` (over the stacked previous hidden states), ``dW_ih``,
  the bias gradients and ``dx`` are each ONE GEMM (or column sum) over all steps.

A reverse direction runs the same loop from ``T-1`` down to 0 (its hidden state array
keeps ``h0`` in the last slot). Bidirectional layers concatenate the two directions'
outputs along the feature axis; dropout (training only) sits between layers, as in
PyTorch. LSTM projections (``proj_size``): the layer keeps the unprojected ``o * tanh(c)``
of every step and adds one GEMM per step each way, and one for ``dW_hr`` at the end.

Per-step choices, each kept because it measured faster: a contiguous copy of ``W_hh^T``,
the activated gates written over the input projection ``XG`` in place, the biases folded
into the projection GEMM (:func:`_input_proj`), bias gradients as a ``ones @ dG`` GEMM
(:func:`_colsum`), per-step views built once outside the loops. Tried and dropped: a
unit-major ``(H, B)`` layout, the whole time loop in one @njit function, other BLAS
layouts for the per-step GEMM. The number: one training step of ``perf/test_bench_lstm.py``
(LSTM 64->128, T=50, B=32) takes 8.9 ms, torch 6.4 ms in the same run; the breakdown and
the rejected variants' timings are in ``perf/README.md`` ("Measurement notes", ``ops/rnn.py``).

Under CPU autocast, as torch 2.13's lists (checked op by op in ``tests/amp``): ``lstm``,
``rnn_tanh``, ``rnn_relu`` and the Elman cells ``rnn_tanh_cell``/``rnn_relu_cell`` run in
the region's lower-precision dtype (``@lower_precision``); ``gru``, ``gru_cell`` and
``lstm_cell`` are on no list and keep their inputs' dtype (float32 in a float32 model).
"""
import numpy as np

from .. import _dtype
from ..autograd.function import Function
from ..backend import backend_of
from ..backend.dispatch import is_array
from ..tensor import Tensor
from ._autocast import lower_precision
from ._util import as_tensor_arg

__all__ = ["lstm_cell", "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "lstm", "gru", "rnn_tanh",
           "rnn_relu"]


def _serial_blas(fn):
    """A layer's forward/backward inside its backend's ``serial_blas()`` (the CPU: SciPy's
    private BLAS on one thread around the whole time loop, each step GEMM ``be.mm_into``
    then split over numba's threads: 33 us for the benchmark's 32x128 @ 128x512 against
    34 us in NumPy's OpenBLAS, and no BLAS thread left spinning)."""
    import functools

    @functools.wraps(fn)
    def run(ctx, *args):
        arr = next((a for a in args if is_array(a)), None)
        if arr is None:
            return fn(ctx, *args)
        with backend_of(arr).serial_blas():
            return fn(ctx, *args)
    return run


# ---- helpers -------------------------------------------------------------------------------------
def _steps(T, reverse):
    """(time order, slot offset of a step's output h, slot offset of its previous h) in the
    (T+1)-slot state arrays: forward keeps h0 in slot 0, reverse in slot T."""
    return (range(T - 1, -1, -1), 0, 1) if reverse else (range(T), 1, 0)


def _seq(a, order, off=0):
    """[a[t + off] for t in order], the per-step views of a stacked buffer, made in one go
    (``list(a)`` slices in C) so the time loops only index Python lists."""
    if not isinstance(a, list):
        a = backend_of(a).rows(a)
    return [a[t + off] for t in order]


def _input_proj(be, x2, w, b1, b2):
    """x2 @ w^T (+ b1 + b2): the input-side pre-activations of every step at once.

    The bias rides in the GEMM as one more input column of ones (``[x2, 1] @ [w, b]^T``):
    for the (1600, 64) @ (64, 512) float32 projection of the LSTM benchmark 0.87 ms
    against 0.98 ms for the GEMM plus an in-place broadcast add over the (1600, 512) result
    (1 thread; the add is a memory-bound pass NumPy does not thread)."""
    if b1 is None:
        return be.dot_t(x2, w, trans_b=True)
    n, k = x2.shape
    xa = be.ones((n, k + 1), x2.dtype)
    xa[:, :k] = x2
    wa = be.empty((w.shape[0], k + 1), w.dtype)
    wa[:, :k] = w
    wa[:, k] = b1 if b2 is None else b1 + b2
    return be.dot_t(xa, wa, trans_b=True)


def _weight_grads(be, needs, dxg, dhg, x2, hprev2, w_ih, has_bias):
    """dx, dW_ih, dW_hh, db_ih, db_hh for gate gradients over all steps (one GEMM each)."""
    nx, nwih, nwhh, nbih, nbhh = needs
    dx = be.dot_t(dxg, w_ih) if nx else None
    dwih = be.dot_t(dxg, x2, trans_a=True) if nwih else None
    dwhh = be.dot_t(dhg, hprev2, trans_a=True) if nwhh else None
    dbih = dbhh = None
    if has_bias:
        if nbih:
            dbih = _colsum(be, dxg)
        if nbhh:
            dbhh = dbih if (dhg is dxg and dbih is not None) else _colsum(be, dhg)
    return dx, dwih, dwhh, dbih, dbhh


def _sequence_grads(be, needs, dxg, dhg, x2, Hs, sp, w_ih, has_bias):
    """:func:`_weight_grads` of a whole layer: the (T, B, G) gate gradients ``dxg``/``dhg``
    (one array when both are the same) against the stacked inputs ``x2`` and the hidden
    states ``Hs[sp:sp + T]``; ``dx`` comes back as (T, B, in)."""
    T, B, G = dxg.shape
    dxg2 = dxg.reshape(T * B, G)
    dhg2 = dxg2 if dhg is dxg else dhg.reshape(T * B, G)
    hprev2 = Hs[sp:sp + T].reshape(T * B, Hs.shape[2])
    dx, dwih, dwhh, dbih, dbhh = _weight_grads(be, needs, dxg2, dhg2, x2, hprev2, w_ih, has_bias)
    return (None if dx is None else dx.reshape(T, B, x2.shape[1])), dwih, dwhh, dbih, dbhh


def _step_inputs(ctx, x, h, w_ih, w_hh, b1, b2):
    """``(be, x, h, xg, hg)`` of one cell step: its backend, the contiguous ``x`` and ``h`` and
    their pre-activations ``x @ W_ih^T (+ b1 + b2)`` and ``h @ W_hh^T``; records on ``ctx``
    whether the cell has biases (``b1`` given)."""
    be = backend_of(x)
    x = be.contiguous(x)
    h = be.contiguous(h)
    ctx.has_bias = b1 is not None
    return be, x, h, _input_proj(be, x, w_ih, b1, b2), be.dot_t(h, w_hh, trans_b=True)


def _colsum(be, a):
    """Column sums of a 2-D array as a GEMM ``ones (1, n) @ a``: for the (T*B, 4H) = (1600,
    512) float32 gate gradients of the LSTM benchmark 80 us against 145 us for
    ``np.sum(a, axis=0)`` (NumPy's reduction over the outer axis does not use BLAS)."""
    return be.dot_t(be.ones((1, a.shape[0]), a.dtype), a).reshape(a.shape[1])


def _state0(be, h0, shape, dt):
    return be.zeros(shape, dt) if h0 is None else h0


# ---- whole-sequence layers (one Function per layer and direction) ----------------------------------
# Buffers, for T steps, batch B, hidden H (P = proj_size or H), G gate columns, all row-major:
#   XG (T, B, G) input-side pre-activations; Hs (T+1, B, P) hidden states (the output is a
#   slice of it); Cs (T+1, B, H) cell states; ACT (T, B, G), TC (T, B, H) saved activations;
#   dG (T, B, G) gate gradients, so dW = dG.reshape(T*B, G)^T @ (stacked inputs).
class LSTMLayer(Function):
    """One LSTM layer and direction over a whole (T, B, in) sequence.

    forward(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse) -> (y (T, B, P), h_n, c_n);
    ``h0``/``c0`` may be None (zeros), biases None (no bias), ``w_hr`` ``(P, H)`` the
    projection of ``proj_size`` LSTMs (``h = (o * tanh(c)) @ W_hr^T``) or None (P = H)."""

    @staticmethod
    @_serial_blas
    def forward(ctx, x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, reverse):
        be = backend_of(x)
        T, B, n_in = x.shape
        G, P = w_hh.shape
        H = G // 4
        dt = x.dtype
        x2 = be.contiguous(x).reshape(T * B, n_in)
        XG = _input_proj(be, x2, w_ih, b_ih, b_hh).reshape(T, B, G)
        Hs = be.empty((T + 1, B, P), dt)
        Cs = be.empty((T + 1, B, H), dt)
        # NOTE: the activated gates overwrite the pre-activations (the cell kernel allows act
        # to alias xg): one (T, B, 4H) buffer less, and each step writes lines it has just read
        # instead of cold ones (~2 us a step at B=32, H=128 float32).
        ACT = XG
        TC = be.empty((T, B, H), dt)
        hg = be.empty((B, G), dt)
        order, so, sp = _steps(T, reverse)
        first = T if reverse else 0
        Hs[first] = _state0(be, h0, (B, P), dt)
        Cs[first] = _state0(be, c0, (B, H), dt)
        k = be.kernel("rnn", "lstm_cell_fwd")
        whhT = be.contiguous(w_hh.T)   # NOTE: a contiguous W^T: the step GEMM ran 38 us vs 55 us
        HR = None
        if w_hr is None:
            # NOTE: per-step views built once (list(A) slices in C) and locals only in the loop:
            # ~1.5 us a step less than indexing the 3-D arrays in the loop.
            mm = be.mm_into
            hl, cl = _seq(Hs, range(T + 1)), _seq(Cs, range(T + 1))
            for at, tt, hp, cp, hn, cn in zip(_seq(ACT, order), _seq(TC, order), _seq(hl, order, sp),
                                              _seq(cl, order, sp), _seq(hl, order, so), _seq(cl, order, so)):
                mm(hp, whhT, out=hg)
                k(at, hg, cp, at, tt, cn, hn)      # the same view as xg and act: in place
        else:
            HR = be.empty((T, B, H), dt)     # the unprojected o * tanh(c), for dW_hr
            whrT = be.contiguous(w_hr.T)
            for t in order:
                be.mm_into(Hs[t + sp], whhT, hg)
                at = ACT[t]
                k(at, hg, Cs[t + sp], at, TC[t], Cs[t + so], HR[t])
                be.mm_into(HR[t], whrT, Hs[t + so])
        y = Hs[so:so + T]
        last = 0 if reverse else T
        hn = be.copy(Hs[last])
        cn = be.copy(Cs[last])
        ctx.reverse = reverse
        ctx.has_bias = b_ih is not None
        ctx.save_for_backward(x2, w_ih, w_hh, w_hr, Hs, Cs, ACT, TC, HR, y)
        return y, hn, cn

    @staticmethod
    @_serial_blas
    def backward(ctx, gy, ghn, gcn):
        x2, w_ih, w_hh, w_hr, Hs, Cs, ACT, TC, HR, _y = ctx.saved_tensors
        be = backend_of(ACT)
        nx, nh0, nc0, nwih, nwhh, nbih, nbhh, nwhr, _ = ctx.needs_input_grad
        T, B, G = ACT.shape
        H = G // 4
        P = Hs.shape[2]
        dt = ACT.dtype
        order, so, sp = _steps(T, ctx.reverse)
        gy = be.contiguous(gy)
        gh = be.copy(ghn)
        gc = be.copy(gcn)
        gc2 = be.empty((B, H), dt)
        dG = be.empty((T, B, G), dt)
        k = be.kernel("rnn", "lstm_cell_bwd")
        last = order[0] if T else None
        GP = None
        if w_hr is None:
            mm = be.mm_into
            rev = order[::-1]
            n_mm = T if nh0 else T - 1      # the last step's dG @ W_hh only feeds dh0
            for i, (gyt, at, tt, cp, dgt) in enumerate(zip(_seq(gy, rev), _seq(ACT, rev), _seq(TC, rev),
                                                           _seq(Cs, rev, sp), _seq(dG, rev))):
                k(gyt, gh, gc, at, tt, cp, dgt, gc2)
                gc, gc2 = gc2, gc
                if i < n_mm:
                    mm(dgt, w_hh, out=gh)
        else:
            GP = be.empty((T, B, P), dt)     # gradient of each projected h, for dW_hr
            graw = be.empty((B, H), dt)
            zero = be.zeros((B, H), dt)
            for t in reversed(order):
                np.add(gy[t], gh, out=GP[t])
                be.mm_into(GP[t], w_hr, graw)
                k(graw, zero, gc, ACT[t], TC[t], Cs[t + sp], dG[t], gc2)
                gc, gc2 = gc2, gc
                if t != last or nh0:
                    be.mm_into(dG[t], w_hh, gh)
        dx, dwih, dwhh, dbih, dbhh = _sequence_grads(be, (nx, nwih, nwhh, nbih, nbhh), dG, dG, x2, Hs, sp,
                                                     w_ih, ctx.has_bias)
        dwhr = None
        if GP is not None and nwhr:
            dwhr = be.dot_t(GP.reshape(T * B, P), HR.reshape(T * B, H), trans_a=True)
        return dx, (gh if nh0 else None), (gc if nc0 else None), dwih, dwhh, dbih, dbhh, dwhr, None


class GRULayer(Function):
    """One GRU layer and direction over a whole (T, B, in) sequence.

    forward(x, h0, w_ih, w_hh, b_ih, b_hh, reverse) -> (y (T, B, H), h_n)."""

    @staticmethod
    @_serial_blas
    def forward(ctx, x, h0, w_ih, w_hh, b_ih, b_hh, reverse):
        be = backend_of(x)
        T, B, n_in = x.shape
        G, H = w_hh.shape
        dt = x.dtype
        x2 = be.contiguous(x).reshape(T * B, n_in)
        XG = _input_proj(be, x2, w_ih, b_ih, None).reshape(T, B, G)
        bhh = b_hh if b_hh is not None else be.zeros((G,), dt)
        Hs = be.empty((T + 1, B, H), dt)
        ACT = be.empty((T, B, 4 * H), dt)
        hg = be.empty((B, G), dt)
        order, so, sp = _steps(T, reverse)
        Hs[T if reverse else 0] = _state0(be, h0, (B, H), dt)
        k = be.kernel("rnn", "gru_cell_fwd")
        whhT = be.contiguous(w_hh.T)
        mm = be.mm_into
        hl = _seq(Hs, range(T + 1))
        for xt, at, hp, hn in zip(_seq(XG, order), _seq(ACT, order), _seq(hl, order, sp),
                                  _seq(hl, order, so)):
            mm(hp, whhT, out=hg)
            k(xt, hg, bhh, hp, at, hn)
        y = Hs[so:so + T]
        hn = be.copy(Hs[0 if reverse else T])
        ctx.reverse = reverse
        ctx.has_bias = b_ih is not None
        ctx.save_for_backward(x2, w_ih, w_hh, Hs, ACT, y)
        return y, hn

    @staticmethod
    @_serial_blas
    def backward(ctx, gy, ghn):
        x2, w_ih, w_hh, Hs, ACT, _y = ctx.saved_tensors
        be = backend_of(ACT)
        nx, nh0, nwih, nwhh, nbih, nbhh, _ = ctx.needs_input_grad
        T, B, G4 = ACT.shape
        H = G4 // 4
        G = 3 * H
        dt = ACT.dtype
        order, so, sp = _steps(T, ctx.reverse)
        gy = be.contiguous(gy)
        gh = be.copy(ghn)
        ghd = be.empty((B, H), dt)
        ghr = be.empty((B, H), dt)
        dXG = be.empty((T, B, G), dt)
        dHG = be.empty((T, B, G), dt)
        k = be.kernel("rnn", "gru_cell_bwd")
        mm = be.mm_into
        add = np.add
        rev = order[::-1]
        n_mm = T if nh0 else T - 1      # the last step's dHG @ W_hh only feeds dh0
        for i, (gyt, at, hp, dxt, dht) in enumerate(zip(_seq(gy, rev), _seq(ACT, rev), _seq(Hs, rev, sp),
                                                        _seq(dXG, rev), _seq(dHG, rev))):
            k(gyt, gh, at, hp, dxt, dht, ghd)
            if i < n_mm:
                mm(dht, w_hh, out=ghr)
                add(ghd, ghr, out=gh)
        dx, dwih, dwhh, dbih, dbhh = _sequence_grads(be, (nx, nwih, nwhh, nbih, nbhh), dXG, dHG, x2, Hs, sp,
                                                     w_ih, ctx.has_bias)
        return dx, (gh if nh0 else None), dwih, dwhh, dbih, dbhh, None


class RNNLayer(Function):
    """One Elman layer (tanh or relu) and direction over a whole (T, B, in) sequence.

    forward(x, h0, w_ih, w_hh, b_ih, b_hh, nonlin, reverse) -> (y (T, B, H), h_n);
    ``nonlin`` 0 = tanh, 1 = relu."""

    @staticmethod
    @_serial_blas
    def forward(ctx, x, h0, w_ih, w_hh, b_ih, b_hh, nonlin, reverse):
        be = backend_of(x)
        T, B, n_in = x.shape
        H = w_hh.shape[0]
        dt = x.dtype
        x2 = be.contiguous(x).reshape(T * B, n_in)
        XG = _input_proj(be, x2, w_ih, b_ih, b_hh).reshape(T, B, H)
        Hs = be.empty((T + 1, B, H), dt)
        hg = be.empty((B, H), dt)
        order, so, sp = _steps(T, reverse)
        Hs[T if reverse else 0] = _state0(be, h0, (B, H), dt)
        k = be.kernel("rnn", "rnn_cell_fwd")
        whhT = be.contiguous(w_hh.T)
        for t in order:
            be.mm_into(Hs[t + sp], whhT, hg)
            k(XG[t], hg, nonlin, Hs[t + so])
        y = Hs[so:so + T]
        hn = be.copy(Hs[0 if reverse else T])
        ctx.reverse = reverse
        ctx.nonlin = nonlin
        ctx.has_bias = b_ih is not None
        ctx.save_for_backward(x2, w_ih, w_hh, Hs, y)
        return y, hn

    @staticmethod
    @_serial_blas
    def backward(ctx, gy, ghn):
        x2, w_ih, w_hh, Hs, _y = ctx.saved_tensors
        be = backend_of(Hs)
        nx, nh0, nwih, nwhh, nbih, nbhh, _, _ = ctx.needs_input_grad
        T1, B, H = Hs.shape
        T = T1 - 1
        dt = Hs.dtype
        order, so, sp = _steps(T, ctx.reverse)
        gy = be.contiguous(gy)
        gh = be.copy(ghn)
        dP = be.empty((T, B, H), dt)
        k = be.kernel("rnn", "rnn_cell_bwd")
        nonlin = ctx.nonlin
        last = order[0] if T else None
        for t in reversed(order):
            k(gy[t], gh, Hs[t + so], nonlin, dP[t])
            if t != last or nh0:
                be.mm_into(dP[t], w_hh, gh)
        dx, dwih, dwhh, dbih, dbhh = _sequence_grads(be, (nx, nwih, nwhh, nbih, nbhh), dP, dP, x2, Hs, sp,
                                                     w_ih, ctx.has_bias)
        return dx, (gh if nh0 else None), dwih, dwhh, dbih, dbhh, None, None


# ---- single steps (one Function per call) --------------------------------------------------------------
class _CellFn(Function):
    """One recurrent step, ``forward(x, h, ..., w_ih, w_hh, b_ih, b_hh, ...)`` with ``w_ih``
    the argument ``w_at``. ``forward`` saves ``(x, h, w_ih, w_hh, *state)``; ``backward``
    asks ``_gate_grads(be, grads, h, *state)`` for the gradients of the input- and
    hidden-side pre-activations ``(dxg, dhg)`` (one array when they are the same), the part
    of ``dh`` that does not pass through ``W_hh`` (or None) and the gradients of the
    arguments between ``h`` and ``w_ih`` (LSTM: ``c``), then adds the GEMMs: those of
    :func:`_weight_grads` and ``dh += dhg @ W_hh``."""
    w_at = 2

    @staticmethod
    def backward(ctx, *grads):
        x, h, w_ih, w_hh, *state = ctx.saved_tensors
        be = backend_of(x)
        dxg, dhg, dh, mid = ctx._gate_grads(be, grads, h, *state)
        n = ctx.needs_input_grad
        w = ctx.w_at
        dx, dwih, dwhh, dbih, dbhh = _weight_grads(be, (n[0],) + tuple(n[w:w + 4]), dxg, dhg, x, h, w_ih,
                                                   ctx.has_bias)
        if not n[1]:
            dh = None
        elif dh is None:
            dh = be.dot_t(dhg, w_hh)
        else:
            dh = np.add(dh, be.dot_t(dhg, w_hh), out=dh)
        return (dx, dh, *mid, dwih, dwhh, dbih, dbhh) + (None,) * (len(n) - w - 4)


class LSTMCellFn(_CellFn):
    """forward(x (B, in), h (B, H), c (B, H), w_ih, w_hh, b_ih, b_hh) -> (h', c')."""
    w_at = 3

    @staticmethod
    def forward(ctx, x, h, c, w_ih, w_hh, b_ih, b_hh):
        be, x, h, xg, hg = _step_inputs(ctx, x, h, w_ih, w_hh, b_ih, b_hh)
        B, G = x.shape[0], w_hh.shape[0]
        H = G // 4
        dt = x.dtype
        c = be.contiguous(c)
        act = be.empty((B, G), dt)
        tc = be.empty((B, H), dt)
        c1 = be.empty((B, H), dt)
        h1 = be.empty((B, H), dt)
        be.kernel("rnn", "lstm_cell_fwd")(xg, hg, c, act, tc, c1, h1)
        ctx.save_for_backward(x, h, w_ih, w_hh, c, act, tc)
        return h1, c1

    def _gate_grads(ctx, be, grads, h, c, act, tc):
        gh, gc = grads
        B, G = act.shape
        H = G // 4
        dG = be.empty((B, G), act.dtype)
        dc = be.empty((B, H), act.dtype)
        be.kernel("rnn", "lstm_cell_bwd")(be.contiguous(gh), be.zeros((B, H), act.dtype), be.contiguous(gc),
                                          act, tc, c, dG, dc)
        return dG, dG, None, ((dc if ctx.needs_input_grad[2] else None),)


class GRUCellFn(_CellFn):
    """forward(x (B, in), h (B, H), w_ih, w_hh, b_ih, b_hh) -> h'."""

    @staticmethod
    def forward(ctx, x, h, w_ih, w_hh, b_ih, b_hh):
        be, x, h, xg, hg = _step_inputs(ctx, x, h, w_ih, w_hh, b_ih, None)
        B, G = x.shape[0], w_hh.shape[0]
        H = G // 3
        dt = x.dtype
        bhh = b_hh if b_hh is not None else be.zeros((G,), dt)
        act = be.empty((B, 4 * H), dt)
        h1 = be.empty((B, H), dt)
        be.kernel("rnn", "gru_cell_fwd")(xg, hg, bhh, h, act, h1)
        ctx.save_for_backward(x, h, w_ih, w_hh, act)
        return h1

    def _gate_grads(ctx, be, grads, h, act):
        (g,) = grads
        B, G4 = act.shape
        H = G4 // 4
        dt = act.dtype
        dxg = be.empty((B, 3 * H), dt)
        dhg = be.empty((B, 3 * H), dt)
        dh = be.empty((B, H), dt)
        be.kernel("rnn", "gru_cell_bwd")(be.contiguous(g), be.zeros((B, H), dt), act, h, dxg, dhg, dh)
        return dxg, dhg, dh, ()


class RNNCellFn(_CellFn):
    """forward(x (B, in), h (B, H), w_ih, w_hh, b_ih, b_hh, nonlin) -> h'."""

    @staticmethod
    def forward(ctx, x, h, w_ih, w_hh, b_ih, b_hh, nonlin):
        be, x, h, xg, hg = _step_inputs(ctx, x, h, w_ih, w_hh, b_ih, b_hh)
        h1 = be.empty((x.shape[0], w_hh.shape[0]), x.dtype)
        be.kernel("rnn", "rnn_cell_fwd")(xg, hg, nonlin, h1)
        ctx.nonlin = nonlin
        ctx.save_for_backward(x, h, w_ih, w_hh, h1)
        return h1

    def _gate_grads(ctx, be, grads, h, h1):
        (g,) = grads
        dp = be.empty(h1.shape, h1.dtype)
        be.kernel("rnn", "rnn_cell_bwd")(be.contiguous(g), be.zeros(h1.shape, h1.dtype), h1, ctx.nonlin, dp)
        return dp, dp, None, ()


# ---- argument checks ---------------------------------------------------------------------------------
def _desc(t):
    return f"{tuple(t.shape)} {t.dtype}"


def _check_same(opname, ref, *tensors):
    """Same device and dtype as ``ref`` for every non-None tensor."""
    for t in tensors:
        if t is None:
            continue
        if type(t.array) is not type(ref.array):
            raise RuntimeError(f"{opname}: expected all tensors to be on the same device, got {ref.device} "
                               f"and {t.device}")
        if t.dtype != ref.dtype:
            raise RuntimeError(f"{opname}: expected all tensors to have dtype {ref.dtype}, got {_desc(t)}")


def _check_cell(opname, x, hs, w_ih, w_hh, b_ih, b_hh, chunks):
    if x.ndim not in (1, 2):
        raise ValueError(f"{opname}: Expected input to be 1D or 2D, got {x.ndim}D instead (input {_desc(x)})")
    if not _dtype.is_float(x.dtype):
        raise TypeError(f"{opname}: expected a floating-point input, got {_desc(x)}")
    H = w_hh.shape[1]
    if w_ih.ndim != 2 or w_hh.ndim != 2 or w_ih.shape[0] != chunks * H or w_hh.shape[0] != chunks * H:
        raise RuntimeError(f"{opname}: weights must be w_ih ({chunks}*H, in) and w_hh ({chunks}*H, H), got "
                           f"{tuple(w_ih.shape)} and {tuple(w_hh.shape)}")
    if x.shape[-1] != w_ih.shape[1]:
        raise RuntimeError(f"{opname}: input has inconsistent input_size: got {x.shape[-1]} expected "
                           f"{w_ih.shape[1]} (input {_desc(x)}, weight_ih {tuple(w_ih.shape)})")
    for b in (b_ih, b_hh):
        if b is not None and tuple(b.shape) != (chunks * H,):
            raise RuntimeError(f"{opname}: bias must have shape ({chunks * H},), got {tuple(b.shape)}")
    want = (H,) if x.ndim == 1 else (x.shape[0], H)
    for h in hs:
        if tuple(h.shape) != want:
            raise RuntimeError(f"{opname}: expected hidden state of shape {want} for input {_desc(x)}, got "
                               f"{_desc(h)}")
    _check_same(opname, x, *hs, w_ih, w_hh, b_ih, b_hh)


def _t(x, name):
    return None if x is None else as_tensor_arg(x, name)


def _cell(fn, opname, input, hxs, w_ih, w_hh, b_ih, b_hh, chunks, *extra):
    x = as_tensor_arg(input, opname)
    w_ih, w_hh, b_ih, b_hh = (_t(a, opname) for a in (w_ih, w_hh, b_ih, b_hh))
    H = w_hh.shape[1]
    hxs = [(_zeros_like_state(x, H) if h is None else as_tensor_arg(h, opname)) for h in hxs]
    _check_cell(opname, x, hxs, w_ih, w_hh, b_ih, b_hh, chunks)
    if x.ndim == 1:
        out = fn.apply(x.unsqueeze(0), *[h.unsqueeze(0) for h in hxs], w_ih, w_hh, b_ih, b_hh, *extra)
        return tuple(o.squeeze(0) for o in out) if isinstance(out, tuple) else out.squeeze(0)
    return fn.apply(x, *hxs, w_ih, w_hh, b_ih, b_hh, *extra)


def _zeros_like_state(x, H):
    be = backend_of(x.array)
    shape = (H,) if x.ndim == 1 else (x.shape[0], H)
    return Tensor._from_array(be.zeros(shape, x.dtype))


# ---- public cell functions ------------------------------------------------------------------------------
def lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One LSTM step (``torch.lstm_cell``).

    Parameters
    ----------
    input : Tensor ``(B, in)`` or ``(in,)``
    hx : tuple ``(h, c)`` of Tensors ``(B, H)`` (or ``(H,)``), or None for zeros
    w_ih, w_hh : Tensors ``(4H, in)`` and ``(4H, H)``, gate order i, f, g, o
    b_ih, b_hh : Tensors ``(4H,)`` or None

    Returns
    -------
    (h', c') : Tensors shaped like ``h``.
    """
    hs = (None, None) if hx is None else tuple(hx)
    if len(hs) != 2:
        raise ValueError(f"lstm_cell: hx must be a tuple (h, c), got {len(hs)} tensors")
    return _cell(LSTMCellFn, "lstm_cell", input, hs, w_ih, w_hh, b_ih, b_hh, 4)


def gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One GRU step (``torch.gru_cell``): gate order r, z, n;
    ``n = tanh(x W_in^T + b_in + r * (h W_hn^T + b_hn))``, ``h' = (1 - z) n + z h``.

    Parameters
    ----------
    input : Tensor ``(B, in)`` or ``(in,)``
    hx : Tensor ``(B, H)`` (or ``(H,)``), or None for zeros
    w_ih, w_hh : Tensors ``(3H, in)`` and ``(3H, H)``
    b_ih, b_hh : Tensors ``(3H,)`` or None

    Returns
    -------
    Tensor shaped like ``hx``.
    """
    return _cell(GRUCellFn, "gru_cell", input, (hx,), w_ih, w_hh, b_ih, b_hh, 3)


@lower_precision
def rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One Elman step ``h' = tanh(x W_ih^T + b_ih + h W_hh^T + b_hh)`` (``torch.rnn_tanh_cell``).

    Parameters
    ----------
    input : Tensor ``(B, in)`` or ``(in,)``
    hx : Tensor ``(B, H)`` (or ``(H,)``), or None for zeros
    w_ih, w_hh : Tensors ``(H, in)`` and ``(H, H)``
    b_ih, b_hh : Tensors ``(H,)`` or None

    Returns
    -------
    Tensor shaped like ``hx``.
    """
    return _cell(RNNCellFn, "rnn_tanh_cell", input, (hx,), w_ih, w_hh, b_ih, b_hh, 1, 0)


@lower_precision
def rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    """One Elman step with relu (``torch.rnn_relu_cell``); see :func:`rnn_tanh_cell`."""
    return _cell(RNNCellFn, "rnn_relu_cell", input, (hx,), w_ih, w_hh, b_ih, b_hh, 1, 1)


# ---- public sequence functions ----------------------------------------------------------------------------
def _run_layers(mode, input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                batch_first):
    """The multi-layer, (bi)directional driver shared by lstm/gru/rnn_*.

    ``hx`` is a tuple of (L*D, B, H) Tensors or Nones (one for GRU/RNN, two for LSTM).
    Returns (output, [h_n parts], [c_n parts])."""
    from .shape import cat, stack
    from .dropout import dropout as _dropout
    opname = {"LSTM": "lstm", "GRU": "gru", "RNN_TANH": "rnn_tanh", "RNN_RELU": "rnn_relu"}[mode]
    x = as_tensor_arg(input, opname)
    if x.ndim != 3:
        raise RuntimeError(f"{opname}: expected a 3-D input (T, B, in) or (B, T, in) with batch_first, got "
                           f"{_desc(x)}")
    D = 2 if bidirectional else 1
    per = 4 if has_biases else 2
    params = [as_tensor_arg(p, opname) for p in params]
    n = num_layers * D
    proj = mode == "LSTM" and len(params) == n * (per + 1)   # weight_hr_l{k} after the biases
    if proj:
        per += 1
    if len(params) != n * per:
        raise RuntimeError(f"{opname}: expected {n * per} parameter tensors ({num_layers} layers x {D} "
                           f"directions x {per}), got {len(params)}")
    if batch_first:
        x = x.transpose(0, 1)
    B = x.shape[1]
    P = params[1].shape[1]                      # size of h (proj_size with projections)
    Hc = params[1].shape[0] // {"LSTM": 4, "GRU": 3}.get(mode, 1)   # size of c
    hx = tuple(None if h is None else as_tensor_arg(h, opname) for h in hx)
    for i, h in enumerate(hx):
        want = (n, B, P if i == 0 else Hc)
        if h is not None and tuple(h.shape) != want:
            raise RuntimeError(f"{opname}: Expected hidden size {want}, got {list(h.shape)}")
    _check_same(opname, x, *params, *hx)
    if x.shape[2] != params[0].shape[1]:
        raise RuntimeError(f"{opname}: input.size(-1) must be equal to input_size. Expected "
                           f"{params[0].shape[1]}, got {x.shape[2]}")
    hn, cn = [], []
    for layer in range(num_layers):
        outs = []
        for d in range(D):
            k = layer * D + d
            w = params[k * per:(k + 1) * per]
            w_ih, w_hh = w[0], w[1]
            b_ih, b_hh = (w[2], w[3]) if has_biases else (None, None)
            h0 = None if hx[0] is None else hx[0][k]
            rev = d == 1
            if mode == "LSTM":
                c0 = None if hx[1] is None else hx[1][k]
                w_hr = w[-1] if proj else None
                y, h, c = LSTMLayer.apply(x, h0, c0, w_ih, w_hh, b_ih, b_hh, w_hr, rev)
                cn.append(c)
            elif mode == "GRU":
                y, h = GRULayer.apply(x, h0, w_ih, w_hh, b_ih, b_hh, rev)
            else:
                y, h = RNNLayer.apply(x, h0, w_ih, w_hh, b_ih, b_hh, 1 if mode == "RNN_RELU" else 0, rev)
            outs.append(y)
            hn.append(h)
        x = outs[0] if D == 1 else cat(outs, dim=2)
        if dropout and train and layer < num_layers - 1:
            x = _dropout(x, float(dropout), True)
    out = x.transpose(0, 1) if batch_first else x
    join = (lambda ts: ts[0].unsqueeze(0)) if len(hn) == 1 else (lambda ts: stack(ts, 0))
    return out, join(hn), (join(cn) if cn else None)


@lower_precision
def lstm(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """A multi-layer LSTM over a whole sequence (``torch.lstm``; what ``nn.LSTM`` runs).

    Parameters
    ----------
    input : Tensor ``(T, B, in)`` (``(B, T, in)`` with ``batch_first``)
    hx : tuple ``(h0, c0)`` of Tensors ``(num_layers * D, B, H)``, D = 2 if bidirectional;
        None entries mean zeros
    params : list of Tensors per layer and direction, in ``nn.LSTM``'s order
        ``w_ih, w_hh[, b_ih, b_hh][, w_hr]`` (``w_hr`` ``(P, H)`` for projections; then
        ``h0`` is ``(num_layers * D, B, P)``)
    has_biases, num_layers, dropout, train, bidirectional, batch_first : as ``nn.LSTM``
        (``dropout`` applies between layers when ``train``)

    Returns
    -------
    (output ``(T, B, D*H)``, h_n, c_n)
    """
    hx = (None, None) if hx is None else tuple(hx)
    out, h, c = _run_layers("LSTM", input, hx, params, has_biases, num_layers, dropout, train, bidirectional,
                            batch_first)
    return out, h, c


def gru(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """A multi-layer GRU over a whole sequence (``torch.gru``); see :func:`lstm`.
    ``hx`` is one Tensor ``(num_layers * D, B, H)`` or None. Returns (output, h_n)."""
    out, h, _ = _run_layers("GRU", input, (hx,), params, has_biases, num_layers, dropout, train,
                            bidirectional, batch_first)
    return out, h


@lower_precision
def rnn_tanh(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """A multi-layer Elman RNN with tanh (``torch.rnn_tanh``); see :func:`gru`."""
    out, h, _ = _run_layers("RNN_TANH", input, (hx,), params, has_biases, num_layers, dropout, train,
                            bidirectional, batch_first)
    return out, h


@lower_precision
def rnn_relu(input, hx, params, has_biases, num_layers, dropout, train, bidirectional, batch_first):
    """A multi-layer Elman RNN with relu (``torch.rnn_relu``); see :func:`gru`."""
    out, h, _ = _run_layers("RNN_RELU", input, (hx,), params, has_biases, num_layers, dropout, train,
                            bidirectional, batch_first)
    return out, h
