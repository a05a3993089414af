"""L-BFGS (``torch.optim.LBFGS``) over the flat parameter arena.

L-BFGS treats its (single) parameter group as one vector of ``n`` elements: the
optimizer's flat arena (:mod:`numbagrad.optim.optimizer`) already is that vector
(``bucket.param``), and the gradient is gathered into a flat buffer, each parameter's read
where it is (its ``bucket.grad`` slot, or its own array through ``bucket.gsrc``), with
zeros for parameters that have no gradient (``torch``'s ``_gather_flat_grad``).
The curvature history is kept in two ``(cap, n)`` ring buffers (``y`` and ``s``, grown
geometrically up to ``history_size + 1`` rows so the next pair always has a free row),
and every vector operation is one kernel call of the ``optim_lbfgs`` family
(``numbagrad/kernels/cpu/optim_lbfgs.py`` and its CUDA twin): the two-loop recursion
(``lbfgs_direction``), the ``y``/``s`` update with its two dot products
(``lbfgs_pair``), ``x += t d`` (``lbfgs_axpy``), dot products and ``max|x|``/``sum|x|``.
Only scalar logic runs in Python.

Semantics are PyTorch's, step for step: the same iteration and evaluation counting, the
same stopping tests, ``H_diag = y.s / y.y``, pairs accepted when ``y.s > 1e-10``, the
history shifted when ``history_size`` pairs are kept, the first step length
``min(1, 1/|g|_1) * lr``, and the optional strong-Wolfe line search (bracketing then zoom
with safeguarded cubic interpolation, Nocedal & Wright, *Numerical Optimization*, 2nd ed.,
Alg. 3.5 and 3.6, with torch's constants ``c1 = 1e-4``, ``c2 = 0.9``, its 10x
extrapolation limit, its 0.1-of-the-interval safeguard, and its bracket-width stop at
``1e-9`` whatever ``tolerance_change`` is). Scalars that torch holds as
0-d tensors of the parameter dtype (dot products, ``ro``, ``H_diag``, ``gtd``, the
interpolated step lengths) are NumPy scalars of that dtype here, so float32 runs round
where torch rounds (NumPy 2 applies Python floats to them in float32, as torch does).

State (``state_dict()['state'][0]``, under the first parameter, as torch): ``func_evals``,
``n_iter``, ``d``, ``t``, ``old_dirs``, ``old_stps``, ``ro``, ``H_diag``,
``prev_flat_grad``, ``prev_loss`` and ``al``. The vectors are views of the optimizer's
buffers (refreshed at the end of every ``step``), so copy a state dict you keep across
steps (``copy.deepcopy``), as later steps update the buffers in place. A state loaded
with :meth:`load_state_dict` (from numbagrad or from ``torch.optim.LBFGS``) is imported
at the next ``step``.
"""
import numpy as np

from .. import _dtype
from ..backend import backend_of
from ..tensor import Tensor
from .optimizer import Optimizer

__all__ = ["LBFGS"]

# elements per reduction chunk (the kernels' ``partial`` scratch has two entries per chunk)
_CHUNK = 4096
_C1, _C2 = 1e-4, 0.9  # sufficient decrease / curvature constants of the strong Wolfe search
# The line search stops shrinking its bracket below this width times max|d|. torch's LBFGS
# does not pass the group's tolerance_change to its line search, so this stays 1e-9.
_LS_TOL_CHANGE = 1e-9


def _host(v):
    """A NumPy array of a state value (numbagrad Tensor, torch tensor, array or scalar)."""
    if isinstance(v, Tensor):
        return np.asarray(backend_of(v.array).to_numpy(v.array))
    if hasattr(v, "detach"):  # a torch tensor (from torch.optim.LBFGS.state_dict())
        return v.detach().cpu().numpy()
    return np.asarray(v)


def _as_scalar(v):
    """A Python number of a scalar state value or hyperparameter."""
    if isinstance(v, (int, float)):
        return v
    return _host(v).item()


class _Trial:
    """A point of the line search: step ``t``, loss ``f``, directional derivative ``gtd``
    and the gradient (a flat buffer)."""

    __slots__ = ("t", "f", "gtd", "g")

    def __init__(self, t, f, gtd, g):
        self.t, self.f, self.gtd, self.g = t, f, gtd, g


def _cubic_minimizer(x1, f1, g1, x2, f2, g2, lo=None, hi=None):
    """Minimiser of the cubic through ``(x1, f1, g1)`` and ``(x2, f2, g2)`` (value and slope
    at two points; Nocedal & Wright eq. 3.59), clamped to ``[lo, hi]`` (default: between
    the points); the midpoint of ``[lo, hi]`` when the cubic has no minimiser."""
    if lo is None:
        lo, hi = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    disc = d1 * d1 - g1 * g2
    if not disc >= 0:  # no real minimiser (or NaN)
        return (lo + hi) / 2.0
    d2 = np.sqrt(disc)
    if x1 <= x2:
        x = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
    else:
        x = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
    return min(max(x, lo), hi)


class _Memory:
    """The L-BFGS working set of one flat vector: direction, gradients, history rings."""

    def __init__(self, be, dtype, n):
        self.be = be
        self.dtype = np.dtype(dtype)
        self.T = self.dtype.type
        self.n = n
        k = lambda name: be.kernel("optim_lbfgs", name)  # noqa: E731
        self.k_gather, self.k_axpy, self.k_dot = k("lbfgs_gather"), k("lbfgs_axpy"), k("lbfgs_dot")
        self.k_pair, self.k_abs, self.k_dir = k("lbfgs_pair"), k("lbfgs_absstats"), k("lbfgs_direction")
        self.partial = be.zeros(2 * max(1, -(-n // _CHUNK)), np.float64)
        self.d = be.zeros(n, dtype)           # search direction
        self.g = be.zeros(n, dtype)           # current flat gradient
        self.pool = [self.g]                  # gradient buffers (line search trials)
        self.prev = None                      # prev_flat_grad
        self.x0 = None                        # parameters at the start of a line search
        self.cap = 0
        self.dirs = self.stps = self.ro = self.al = None
        self.start = 0
        self.count = 0
        self.h_diag = 1
        self.t = None
        self.prev_loss = None
        self.has_d = False
        self.has_al = False
        self.published = None                 # the ``old_dirs`` list last put in the state
        self.bucket = None

    # ---- history ring -------------------------------------------------------------------
    def _reserve(self, rows, history_size):
        """Make room for ``rows`` pairs (rows in logical order from 0 after a regrowth)."""
        if rows <= self.cap:
            return
        cap = max(rows, min(history_size + 1, max(4, 2 * self.cap)))
        be, n = self.be, self.n
        dirs, stps = be.zeros((cap, n), self.dtype), be.zeros((cap, n), self.dtype)
        ro, al = be.zeros(cap, self.dtype), be.zeros(cap, self.dtype)
        for k in range(self.count):
            j = (self.start + k) % self.cap
            dirs[k] = self.dirs[j]
            stps[k] = self.stps[j]
            ro[k:k + 1] = self.ro[j:j + 1]
        if self.al is not None:
            al[:self.al.shape[0]] = self.al
        self.dirs, self.stps, self.ro, self.al, self.cap, self.start = dirs, stps, ro, al, cap, 0

    def update_history(self, t, history_size):
        """Form ``y = g - prev_g``, ``s = t d`` and keep the pair if ``y.s > 1e-10``
        (dropping the oldest pair when ``history_size`` are kept); returns nothing."""
        T = self.T
        self._reserve(self.count + 1, history_size)
        slot = (self.start + self.count) % self.cap  # a free row
        ys, yy = self.k_pair(self.g, self.prev, self.d, T(t), self.dirs[slot], self.stps[slot], self.partial)
        ys = T(ys)
        if ys > 1e-10:
            if self.count == history_size:
                self.start = (self.start + 1) % self.cap
                self.count -= 1
            self.count += 1
            self.ro[slot] = 1.0 / ys
            self.h_diag = ys / T(yy)

    def direction(self):
        """``d = -H g`` by the two-loop recursion."""
        # before the first pair there is no ring yet: the kernel reads no row when count == 0
        cap_rows = self.dirs if self.dirs is not None else self.d.reshape(1, self.n)
        ro = self.ro if self.ro is not None else self.d[:1]
        al = self.al if self.al is not None else self.d[:1]
        self.k_dir(self.g, cap_rows, cap_rows if self.stps is None else self.stps, ro, al,
                   self.start, self.count, self.T(self.h_diag), self.d, self.partial)

    # ---- vectors ---------------------------------------------------------------------------
    def dot(self, a, b):
        return self.T(self.k_dot(a, b, self.partial))

    def absstats(self, x):
        mx, sm = self.k_abs(x, self.partial)
        return self.T(mx), self.T(sm)

    def gather(self, b, out):
        if b.any_active:
            self.k_gather(b.grad, b.tables, out)
        else:
            out[...] = 0

    def free_buffer(self, live):
        """A gradient buffer that no point in ``live`` holds."""
        used = {id(p.g) for p in live}
        for buf in self.pool:
            if id(buf) not in used:
                return buf
        buf = self.be.zeros(self.n, self.dtype)
        self.pool.append(buf)
        return buf

    # ---- state ----------------------------------------------------------------------------
    def publish(self, state, history_size):
        """Put the working set into ``state`` in torch's layout (views of the buffers)."""
        be, view = self.be, Tensor._from_array
        rows = [(self.start + k) % self.cap for k in range(self.count)] if self.cap else []
        old_dirs = [view(self.dirs[j]) for j in rows]
        state["d"] = view(self.d) if self.has_d else None
        state["t"] = float(self.t) if self.t is not None else None
        state["old_dirs"] = old_dirs
        state["old_stps"] = [view(self.stps[j]) for j in rows]
        state["ro"] = [view(self.ro[j:j + 1].reshape(())) for j in rows]
        state["H_diag"] = (self.h_diag if isinstance(self.h_diag, int)
                           else view(be.asarray(np.array(self.h_diag, self.dtype))))
        state["prev_flat_grad"] = view(self.prev) if self.prev is not None else None
        state["prev_loss"] = self.prev_loss
        if self.has_al:
            al = [view(self.al[k:k + 1].reshape(())) for k in range(self.count)]
            state["al"] = al + [None] * max(0, history_size - len(al))
        self.published = old_dirs

    def load(self, state, history_size):
        """Take over a state written by :meth:`publish` or by ``torch.optim.LBFGS``."""
        T, be = self.T, self.be

        def vec(v):
            a = _host(v).reshape(-1)
            if a.size != self.n:
                raise ValueError(f"LBFGS: a state vector has {a.size} elements, the parameters have {self.n}")
            return be.asarray(np.ascontiguousarray(a, dtype=self.dtype))

        if state.get("d") is not None:
            self.d[...] = vec(state["d"])
            self.has_d = True
        dirs, stps = list(state.get("old_dirs") or ()), list(state.get("old_stps") or ())
        ros = list(state.get("ro") or ())
        if not len(dirs) == len(stps) == len(ros):
            raise ValueError("LBFGS: the state's old_dirs, old_stps and ro differ in length")
        if dirs:
            self._reserve(len(dirs) + 1, max(history_size, len(dirs)))
        for k, (y, s, r) in enumerate(zip(dirs, stps, ros)):
            self.dirs[k] = vec(y)
            self.stps[k] = vec(s)
            self.ro[k] = T(_as_scalar(r))
        self.count = len(dirs)
        h = state.get("H_diag", 1)
        self.h_diag = h if isinstance(h, int) else T(_as_scalar(h))
        t = state.get("t")
        self.t = None if t is None else _as_scalar(t)
        if state.get("prev_flat_grad") is not None:
            self.prev = be.empty(self.n, self.dtype)
            self.prev[...] = vec(state["prev_flat_grad"])
        pl = state.get("prev_loss")
        self.prev_loss = None if pl is None else float(_as_scalar(pl))
        self.has_al = "al" in state
        self.published = state.get("old_dirs")


class LBFGS(Optimizer):
    """L-BFGS (``torch.optim.LBFGS``; Nocedal, 1980, "Updating Quasi-Newton Matrices with
    Limited Storage"; Liu & Nocedal, 1989), with an optional strong-Wolfe line search
    (Nocedal & Wright, "Numerical Optimization", 2006, algorithms 3.5-3.6).

    Each iteration, with the flat gradient ``g`` and the stored pairs
    ``(s_i, y_i) = (x_{i+1} - x_i, g_{i+1} - g_i)``, ``rho_i = 1 / (y_i . s_i)``::

        q = -g
        for i from newest to oldest:  a_i = rho_i * (s_i . q);  q = q - a_i * y_i
        q = q * (s . y) / (y . y)                            # the newest pair's scaling
        for i from oldest to newest:  b = rho_i * (y_i . q);    q = q + (a_i - b) * s_i
        d = q                                                # the search direction
        x = x + step * d     (step = lr, or the line search's; the first iteration uses
                              min(1, 1 / |g|_1) * lr)

    A pair is stored only when ``y . s > 1e-10``; the oldest is dropped beyond
    ``history_size``.

    ``step(closure)`` runs up to ``max_iter`` iterations, re-evaluating the model through
    ``closure`` (which clears the gradients, computes the loss, calls ``backward`` and
    returns the loss); it returns the loss of the first evaluation. One parameter group
    only, all parameters of one dtype and device. Parameters without a gradient count as
    zero gradient. Memory: two history rings of at most ``history_size + 1``
    parameter-sized rows each (grown geometrically as pairs accumulate), plus a few
    parameter-sized buffers (direction, gradients, the line search's trial gradients).

    Parameters
    ----------
    lr : float, default 1 (step length; the first iteration uses ``min(1, 1/|g|_1) * lr``)
    max_iter : int, default 20 (iterations per ``step``)
    max_eval : int, default ``max_iter * 5 // 4`` (closure evaluations per ``step``)
    tolerance_grad : float, default 1e-7 (stop when ``max |g| <= tolerance_grad``)
    tolerance_change : float, default 1e-9 (stop when the loss or the step changes less)
    history_size : int, default 100 (curvature pairs kept)
    line_search_fn : None or ``"strong_wolfe"``, default None (fixed step ``lr``)
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7, tolerance_change=1e-9,
                 history_size=100, line_search_fn=None):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= _as_scalar(lr):
            raise ValueError(f"Invalid learning rate: {lr}")
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval, tolerance_grad=tolerance_grad,
                        tolerance_change=tolerance_change, history_size=history_size,
                        line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        self._mem = None

    def __setstate__(self, state):
        super().__setstate__(state)
        self._mem = None

    # ---- the flat vector -----------------------------------------------------------------
    def _bucket(self):
        """The group's arena bucket, with this evaluation's gradients gathered into it."""
        arena = self._prepare(self.param_groups[0])
        if len(arena.buckets) != 1:
            raise TypeError("LBFGS: all parameters must have the same dtype (got "
                            f"{', '.join(str(b.dtype) for b in arena.buckets)})")
        b = arena.buckets[0]
        if b.dtype == _dtype.bfloat16:
            raise TypeError("LBFGS: bfloat16 parameters are not supported (its history and line search "
                            "need float32 or float64); keep float32 master weights")
        return b

    def _memory(self, b, state, history_size):
        mem = self._mem
        if (mem is None or mem.dtype != b.dtype or mem.n != b.param.size or type(mem.d) is not type(b.param)
                or state.get("old_dirs") is not mem.published):
            mem = _Memory(backend_of(b.param), b.dtype, b.param.size)
            mem.load(state, history_size)
            self._mem = mem
        mem.bucket = b
        return mem

    def _evaluate(self, closure, mem):
        """Run the closure; gather the gradient into ``mem.g``; returns the loss (float)."""
        loss = float(self._closure(closure))
        mem.bucket = self._bucket()
        mem.gather(mem.bucket, mem.g)
        return loss

    # ---- step ----------------------------------------------------------------------------
    def step(self, closure):
        """Run up to ``max_iter`` L-BFGS iterations; ``closure`` re-evaluates the model and
        returns the loss. Returns the loss of the first evaluation."""
        if closure is None or not callable(closure):
            raise TypeError("LBFGS.step() requires a closure that re-evaluates the model and returns the loss")
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        group = self.param_groups[0]
        lr = float(_as_scalar(group["lr"]))
        max_iter, max_eval = group["max_iter"], group["max_eval"]
        tol_grad, tol_change = group["tolerance_grad"], group["tolerance_change"]
        line_search, history_size = group["line_search_fn"], group["history_size"]

        state = self.state[group["params"][0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)

        orig_loss = self._closure(closure)
        loss = float(orig_loss)
        evals = 1
        state["func_evals"] += 1
        mem = self._memory(self._bucket(), state, history_size)
        T = mem.T
        mem.gather(mem.bucket, mem.g)
        gmax, gsum = mem.absstats(mem.g)
        if gmax <= T(tol_grad):
            return orig_loss

        with np.errstate(all="ignore"):
            self._iterate(closure, mem, state, loss, evals, gsum, lr, max_iter, max_eval, T(tol_grad),
                          tol_change, line_search, history_size)
        mem.publish(state, history_size)
        return orig_loss

    def _iterate(self, closure, mem, state, loss, evals, gsum, lr, max_iter, max_eval, tol_grad, tol_change,
                 line_search, history_size):
        T = mem.T
        it = 0
        while it < max_iter:
            it += 1
            state["n_iter"] += 1
            first = state["n_iter"] == 1

            # direction: steepest descent on the very first iteration, else the two-loop
            # recursion over the history updated with the last step
            if first:
                mem.count, mem.start, mem.h_diag = 0, 0, 1
            else:
                mem.update_history(mem.t, history_size)
                mem.has_al = True
            mem.direction()
            mem.has_d = True
            if mem.prev is None:
                mem.prev = mem.be.empty(mem.n, mem.dtype)
            mem.prev[...] = mem.g
            mem.prev_loss = loss

            # step length: scaled on the very first iteration, else lr
            t = min(1.0, 1.0 / gsum) * lr if first else lr
            mem.t = t
            gtd = mem.dot(mem.g, mem.d)
            if gtd > -tol_change:
                break  # not a descent direction (to tolerance)

            b = mem.bucket
            if line_search is not None:
                if line_search != "strong_wolfe":
                    raise RuntimeError("only 'strong_wolfe' is supported")
                loss, t, nev = self._strong_wolfe(closure, mem, t, loss, gtd, max_eval - evals)
                mem.t = t
                b = mem.bucket
                mem.k_axpy(b.param, mem.d, T(t))
                opt_cond = mem.absstats(mem.g)[0] <= tol_grad
            else:
                mem.k_axpy(b.param, mem.d, T(t))
                nev = 0
                opt_cond = False
                if it != max_iter:  # the last iteration's loss would go unused
                    loss = self._evaluate(closure, mem)
                    gmax, gsum = mem.absstats(mem.g)
                    opt_cond = gmax <= tol_grad
                    nev = 1
            evals += nev
            state["func_evals"] += nev

            if it == max_iter or evals >= max_eval or opt_cond:
                break
            # no progress: the step moved no coordinate by more than tolerance_change
            if mem.absstats(mem.d)[0] * abs(T(t)) <= tol_change:
                break
            if abs(loss - mem.prev_loss) < tol_change:
                break

    # ---- strong Wolfe line search -----------------------------------------------------------
    def _strong_wolfe(self, closure, mem, t, f0, gtd0, max_ls, tol_change=_LS_TOL_CHANGE):
        """Find a step along ``mem.d`` that satisfies the strong Wolfe conditions
        (Nocedal & Wright Alg. 3.5: bracket, then Alg. 3.6: zoom), starting at ``t``.

        Each trial moves the parameters to ``x0 + t d``, evaluates the closure, gathers the
        gradient into a free buffer and moves them back. Returns ``(loss, t, evaluations)``
        and leaves the chosen point's gradient in ``mem.g``. ``max_ls`` bounds the
        iterations (torch: ``max_eval`` minus the evaluations so far).
        """
        T = mem.T
        if mem.x0 is None:
            mem.x0 = mem.be.empty(mem.n, mem.dtype)
        mem.x0[...] = mem.bucket.param
        d_norm = mem.absstats(mem.d)[0]
        origin = _Trial(0, f0, gtd0, mem.g)

        def trial(step, live):
            buf = mem.free_buffer(live)
            mem.k_axpy(mem.bucket.param, mem.d, T(step))
            f = float(self._closure(closure))
            mem.bucket = self._bucket()
            mem.gather(mem.bucket, buf)
            mem.bucket.param[...] = mem.x0
            return _Trial(step, f, mem.dot(buf, mem.d), buf)

        def armijo_fails(p):
            return p.f > f0 + _C1 * p.t * gtd0

        def curvature_holds(p):
            return abs(p.gtd) <= -_C2 * gtd0

        # Alg. 3.5: increase the step until an interval brackets an acceptable point
        cur = trial(t, [origin])
        nev = 1
        prev = origin
        bracket, done = None, False
        ls = 0
        while ls < max_ls:
            if armijo_fails(cur) or (ls > 1 and cur.f >= prev.f):
                bracket = [prev, cur]
                break
            if curvature_holds(cur):
                bracket, done = [cur], True
                break
            if cur.gtd >= 0:
                bracket = [prev, cur]
                break
            # extrapolate by cubic interpolation within [t + 0.01 (t - t_prev), 10 t]
            nxt = _cubic_minimizer(prev.t, prev.f, prev.gtd, cur.t, cur.f, cur.gtd,
                                   cur.t + 0.01 * (cur.t - prev.t), cur.t * 10)
            prev = cur
            cur = trial(nxt, [origin, prev])
            nev += 1
            ls += 1
        if bracket is None:  # out of evaluations: choose between the origin and the last trial
            bracket = [origin, cur]

        # Alg. 3.6: shrink the bracket [lo, hi] until a point satisfies both conditions
        lo, hi = (0, 1) if bracket[0].f <= bracket[-1].f else (1, 0)
        stalled = False
        while not done and ls < max_ls:
            a, b = bracket
            if abs(b.t - a.t) * d_norm < tol_change:
                break
            nt = _cubic_minimizer(a.t, a.f, a.gtd, b.t, b.f, b.gtd)
            left, right = min(a.t, b.t), max(a.t, b.t)
            margin = 0.1 * (right - left)
            # safeguard: a trial too close to an end is moved 10% inside the interval when
            # it sits on the end, or after two such trials in a row
            if min(right - nt, nt - left) < margin:
                if stalled or nt >= right or nt <= left:
                    nt = right - margin if abs(nt - right) < abs(nt - left) else left + margin
                    stalled = False
                else:
                    stalled = True
            else:
                stalled = False
            new = trial(nt, bracket)
            nev += 1
            ls += 1
            if armijo_fails(new) or new.f >= bracket[lo].f:
                bracket[hi] = new
                lo, hi = (0, 1) if bracket[0].f <= bracket[1].f else (1, 0)
            else:
                if curvature_holds(new):
                    done = True
                elif new.gtd * (bracket[hi].t - bracket[lo].t) >= 0:
                    bracket[hi] = bracket[lo]
                bracket[lo] = new

        best = bracket[lo]
        mem.g = best.g
        return best.f, best.t, nev
