"""numbagrad.distributions against torch.distributions (float64): log_prob, entropy and
moments and their gradients, kl_divergence, reparameterised-sample gradients (against a
central difference at a fixed seed), sample statistics, shapes and validate_args errors."""
import math

import numpy as np
import pytest

import numbagrad as ng

torch = pytest.importorskip("torch")

ND, TD = ng.distributions, torch.distributions
RNG = np.random.default_rng(1234)


def _pos(*shape, lo=0.5, hi=2.0):
    return RNG.uniform(lo, hi, size=shape)


# name -> (builder(D, params), params as NumPy arrays, value(params) as a NumPy array or None
#          for a sample from torch)
def _uniform_params():
    low = RNG.normal(size=(3,))
    return {"low": low, "high": low + _pos(3)}


def _spd(*batch, n=3):
    a = RNG.normal(size=batch + (n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


CASES = {
    "normal": (lambda D, p: D.Normal(p["loc"], p["scale"]),
               {"loc": RNG.normal(size=(3, 1)), "scale": _pos(4)}, None),
    "uniform": (lambda D, p: D.Uniform(p["low"], p["high"]), _uniform_params(), None),
    "exponential": (lambda D, p: D.Exponential(p["rate"]), {"rate": _pos(2, 3)}, None),
    "laplace": (lambda D, p: D.Laplace(p["loc"], p["scale"]),
                {"loc": RNG.normal(size=(4,)), "scale": _pos(4)}, None),
    "categorical_probs": (lambda D, p: D.Categorical(probs=p["probs"]), {"probs": _pos(2, 5)}, None),
    "categorical_logits": (lambda D, p: D.Categorical(logits=p["logits"]),
                           {"logits": RNG.normal(size=(3, 4))}, None),
    "bernoulli_probs": (lambda D, p: D.Bernoulli(probs=p["probs"]),
                        {"probs": RNG.uniform(0.1, 0.9, size=(5,))}, None),
    "bernoulli_logits": (lambda D, p: D.Bernoulli(logits=p["logits"]),
                         {"logits": RNG.normal(size=(2, 3))}, None),
    "onehot": (lambda D, p: D.OneHotCategorical(probs=p["probs"]), {"probs": _pos(3, 4)}, None),
    "independent_normal": (lambda D, p: D.Independent(D.Normal(p["loc"], p["scale"]), 1),
                           {"loc": RNG.normal(size=(2, 3)), "scale": _pos(2, 3)}, None),
    "mvn_cov": (lambda D, p: D.MultivariateNormal(p["loc"], covariance_matrix=p["covariance_matrix"]),
                {"loc": RNG.normal(size=(3,)), "covariance_matrix": _spd(2)}, None),
    "mvn_tril": (lambda D, p: D.MultivariateNormal(p["loc"], scale_tril=p["scale_tril"]),
                 {"loc": RNG.normal(size=(2, 3)), "scale_tril": np.linalg.cholesky(_spd())}, None),
    "mvn_prec": (lambda D, p: D.MultivariateNormal(p["loc"], precision_matrix=p["precision_matrix"]),
                 {"loc": RNG.normal(size=(2, 3)), "precision_matrix": _spd(2)}, None),
    "gamma": (lambda D, p: D.Gamma(p["concentration"], p["rate"]),
              {"concentration": _pos(3), "rate": _pos(2, 1)}, None),
    "beta": (lambda D, p: D.Beta(p["concentration1"], p["concentration0"]),
             {"concentration1": _pos(4), "concentration0": _pos(4)}, None),
}


def _tensors(params, lib, grad=True):
    return {k: lib.tensor(v, dtype=lib.float64, requires_grad=grad) for k, v in params.items()}


def _both(name, params=None):
    build, p, _ = CASES[name]
    p = p if params is None else params
    ngp, tp = _tensors(p, ng), _tensors(p, torch)
    return build(ND, ngp), ngp, build(TD, tp), tp


def _value(td, seed=0):
    torch.manual_seed(seed)
    return td.sample((2,)).detach().numpy()


def _close(a, b, rtol=1e-9, atol=1e-10):
    a = a.detach().numpy() if hasattr(a, "detach") else np.asarray(a)
    np.testing.assert_allclose(np.asarray(a, dtype=np.float64), b.detach().numpy().astype(np.float64),
                               rtol=rtol, atol=atol, equal_nan=True)


def _finite(t):
    return bool(torch.isfinite(t).all())


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_match_torch(name):
    nd, ngp, td, tp = _both(name)
    v = _value(td)
    lp_n, lp_t = nd.log_prob(ng.tensor(v)), td.log_prob(torch.tensor(v))
    _close(lp_n, lp_t)
    assert tuple(lp_n.shape) == tuple(lp_t.shape)
    ent_n, ent_t = nd.entropy(), td.entropy()
    _close(ent_n, ent_t)
    obj_n, obj_t = lp_n.sum() * 0.7 + ent_n.sum() * 1.3, lp_t.sum() * 0.7 + ent_t.sum() * 1.3
    for i, attr in enumerate(("mean", "variance", "stddev")):
        mn, mt = getattr(nd, attr), getattr(td, attr)
        _close(mn, mt)
        if _finite(mt):
            obj_n, obj_t = obj_n + (i + 2) * mn.sum(), obj_t + (i + 2) * mt.sum()
    obj_n.backward()
    obj_t.backward()
    for k in tp:
        _close(ngp[k].grad, tp[k].grad, rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("name", sorted(CASES))
def test_shapes_match_torch(name):
    nd, _, td, _ = _both(name)
    assert tuple(nd.batch_shape) == tuple(td.batch_shape)
    assert tuple(nd.event_shape) == tuple(td.event_shape)
    for sample_shape in [(), (5,), (2, 3)]:
        s_n, s_t = nd.sample(sample_shape), td.sample(sample_shape)
        assert tuple(s_n.shape) == tuple(s_t.shape)
        assert not s_n.requires_grad
        assert tuple(nd.log_prob(s_n).shape) == tuple(td.log_prob(s_t).shape)
    if name not in ("gamma", "beta"):  # numbagrad's Gamma and Beta have no rsample
        assert nd.has_rsample == td.has_rsample


KL_PAIRS = ["normal", "uniform", "exponential", "laplace", "categorical_probs",
            "categorical_logits", "bernoulli_probs", "bernoulli_logits", "onehot", "independent_normal",
            "mvn_cov", "mvn_tril", "mvn_prec", "gamma", "beta"]


def _perturbed(name):
    _, p, _ = CASES[name]
    out = {}
    for k, v in p.items():
        if k in ("covariance_matrix", "precision_matrix"):
            out[k] = v + _spd(n=v.shape[-1]) * 0.2
        elif k == "scale_tril":
            out[k] = np.linalg.cholesky(v @ v.T + _spd(n=v.shape[-1]) * 0.2)
        elif k in ("probs", "scale", "rate", "concentration", "concentration1", "concentration0"):
            out[k] = v * _pos(*v.shape, lo=0.8, hi=1.25)
            if name.startswith("bernoulli"):
                out[k] = np.clip(out[k], 0.05, 0.95)
        elif k == "low":
            out[k] = v - _pos(*v.shape, lo=0.1, hi=0.5)  # q's support contains p's
        elif k == "high":
            out[k] = v + _pos(*v.shape, lo=0.1, hi=0.5)
        else:
            out[k] = v + RNG.normal(size=v.shape) * 0.3
    return out


@pytest.mark.parametrize("name", KL_PAIRS)
def test_kl_divergence_matches_torch(name):
    p_n, pp_n, p_t, pp_t = _both(name)
    q_n, qp_n, q_t, qp_t = _both(name, _perturbed(name))
    kl_n, kl_t = ND.kl_divergence(p_n, q_n), TD.kl_divergence(p_t, q_t)
    assert tuple(kl_n.shape) == tuple(kl_t.shape)
    _close(kl_n, kl_t)
    assert float(kl_t.detach().min()) > 0  # a real check: the distributions differ
    kl_n.sum().backward()
    kl_t.sum().backward()
    for a, b in [(pp_n, pp_t), (qp_n, qp_t)]:
        for k in b:
            _close(a[k].grad, b[k].grad, rtol=1e-7, atol=1e-9)


def test_kl_infinite_and_unregistered():
    p, q = ND.Uniform(0.0, 2.0), ND.Uniform(0.5, 3.0)  # p's support is not inside q's
    assert math.isinf(ND.kl_divergence(p, q).item())
    assert ND.kl_divergence(ND.Bernoulli(probs=0.5), ND.Bernoulli(probs=0.0)).item() == math.inf
    with pytest.raises(NotImplementedError, match="No KL"):
        ND.kl_divergence(ND.Normal(0.0, 1.0), ND.Bernoulli(probs=0.3))
    with pytest.raises(NotImplementedError):
        ND.kl_divergence(ND.Independent(ND.Normal(ng.zeros(2, 2), 1.0), 1),
                         ND.Independent(ND.Normal(ng.zeros(2, 2), 1.0), 2))


def test_register_kl_picks_the_most_specific_pair():
    class MyNormal(ND.Normal):
        """A subclass to dispatch on."""

    assert ND.kl_divergence(MyNormal(0.0, 1.0), MyNormal(1.0, 1.0)).item() == pytest.approx(0.5)

    @ND.register_kl(MyNormal, ND.Normal)
    def _kl(p, q):
        return ng.full((), 7.0)

    assert ND.kl_divergence(MyNormal(0.0, 1.0), MyNormal(1.0, 1.0)).item() == 7.0
    assert ND.kl_divergence(ND.Normal(0.0, 1.0), MyNormal(1.0, 1.0)).item() == pytest.approx(0.5)


RSAMPLE = ["normal", "uniform", "exponential", "laplace", "independent_normal", "mvn_tril"]


@pytest.mark.parametrize("name", RSAMPLE)
def test_rsample_gradient_is_the_derivative_at_fixed_noise(name):
    build, p, _ = CASES[name]
    weights = RNG.normal(size=(7,) + tuple(build(TD, _tensors(p, torch, False)).batch_shape
                                           + build(TD, _tensors(p, torch, False)).event_shape))

    def f(params, grad):
        ng.manual_seed(3)
        t = _tensors(params, ng, grad)
        x = build(ND, t).rsample((7,))
        return (x * ng.tensor(weights)).sum(), t

    out, t = f(p, True)
    out.backward()
    h = 1e-6
    for k, v in p.items():
        num = np.zeros_like(v)
        for idx in np.ndindex(v.shape):
            if k == "scale_tril" and idx[-1] > idx[-2]:
                continue  # stay lower triangular (validate_args); compared below on the triangle
            hi, lo = dict(p), dict(p)
            hi[k], lo[k] = v.copy(), v.copy()
            hi[k][idx] += h
            lo[k][idx] -= h
            num[idx] = (f(hi, False)[0].item() - f(lo, False)[0].item()) / (2 * h)
        g = t[k].grad.numpy()
        if k == "scale_tril":
            g, num = np.tril(g), np.tril(num)
        np.testing.assert_allclose(g, num, rtol=1e-5, atol=1e-6)


def test_normal_rsample_gradients():
    loc = ng.tensor([0.5, -1.0], dtype=ng.float64, requires_grad=True)
    scale = ng.tensor([1.0, 2.0], dtype=ng.float64, requires_grad=True)
    x = ND.Normal(loc, scale).rsample((1000,))
    assert x.requires_grad and tuple(x.shape) == (1000, 2)
    x.mean(0).sum().backward()
    np.testing.assert_allclose(loc.grad.numpy(), [1.0, 1.0])
    eps = (x.detach().numpy() - loc.detach().numpy()) / scale.detach().numpy()
    np.testing.assert_allclose(scale.grad.numpy(), eps.mean(0), rtol=1e-10)


N = 20000


@pytest.mark.parametrize("name", ["normal", "uniform", "exponential", "laplace",
                                  "bernoulli_probs", "onehot", "independent_normal", "mvn_cov",
                                  "mvn_prec", "gamma", "beta"])
def test_sample_statistics(name):
    nd, _, td, _ = _both(name)
    ng.manual_seed(0)
    x = nd.sample((N,)).numpy()
    mean, var = td.mean.detach().numpy(), td.variance.detach().numpy()
    m = x.mean(0)
    assert np.all(np.abs(m - mean) < 5 * np.sqrt(var / N)), (m, mean)
    np.testing.assert_allclose(x.var(0), var, rtol=0.12)


def test_categorical_sample_frequencies():
    probs = np.array([[0.1, 0.2, 0.7], [0.5, 0.25, 0.25]])
    d = ND.Categorical(probs=ng.tensor(probs))
    ng.manual_seed(0)
    x = d.sample((N,)).numpy()
    assert x.dtype == np.int64 and x.shape == (N, 2)
    freq = np.stack([(x == k).mean(0) for k in range(3)], -1)
    assert np.all(np.abs(freq - probs) < 5 * np.sqrt(probs * (1 - probs) / N))


@pytest.mark.parametrize("name", ["normal", "categorical_logits", "bernoulli_probs", "laplace"])
def test_manual_seed_reproduces_samples(name):
    nd = _both(name)[0]
    ng.manual_seed(11)
    a = nd.sample((4,)).numpy()
    ng.manual_seed(11)
    b = nd.sample((4,)).numpy()
    c = nd.sample((4,)).numpy()
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(b, c)


def test_independent_and_expand_shapes():
    base = ND.Normal(ng.zeros(4, 2, 3), ng.ones(4, 2, 3))
    d = ND.Independent(base, 2)
    assert tuple(d.batch_shape) == (4,) and tuple(d.event_shape) == (2, 3)
    assert tuple(d.sample((5,)).shape) == (5, 4, 2, 3)
    assert tuple(d.log_prob(ng.zeros(5, 4, 2, 3)).shape) == (5, 4)
    e = ND.Normal(ng.tensor([0.0, 1.0]), 1.0).expand((3, 2))
    assert tuple(e.batch_shape) == (3, 2) and tuple(e.sample((4,)).shape) == (4, 3, 2)
    c = ND.Categorical(logits=ng.zeros(3)).expand((2,))
    assert tuple(c.batch_shape) == (2,) and tuple(c.sample((5,)).shape) == (5, 2)
    assert tuple(d.expand((5, 4)).sample().shape) == (5, 4, 2, 3)


def test_cdf_icdf_match_torch():
    for name in ["normal", "uniform", "exponential", "laplace"]:
        nd, _, td, _ = _both(name)
        v = _value(td)
        _close(nd.cdf(ng.tensor(v)), td.cdf(torch.tensor(v)))
        q = RNG.uniform(0.05, 0.95, size=v.shape)
        _close(nd.icdf(ng.tensor(q)), td.icdf(torch.tensor(q)), rtol=1e-8)


def _first_line(fn, lib):
    with pytest.raises(ValueError) as info:
        fn(lib.distributions, lib)
    return str(info.value).splitlines()[0].replace("torch.Size", "numbagrad.Size")


ERRORS = [
    lambda D, t: D.Normal(0.0, -1.0),
    lambda D, t: D.Normal(t.tensor([0.0, float("nan")]), 1.0),
    lambda D, t: D.Uniform(1.0, 0.0),
    lambda D, t: D.Exponential(t.tensor([1.0, 0.0])),
    lambda D, t: D.Laplace(0.0, t.tensor([-2.0])),
    lambda D, t: D.Categorical(probs=t.tensor([-1.0, 2.0])),
    lambda D, t: D.Categorical(probs=t.tensor([0.5, 0.5]), logits=t.tensor([0.0, 0.0])),
    lambda D, t: D.Categorical(probs=t.tensor(0.5)),
    lambda D, t: D.Bernoulli(probs=t.tensor([1.5, 0.2])),
    lambda D, t: D.Bernoulli(),
    lambda D, t: D.Independent(D.Normal(t.zeros(2), 1.0), 2),
    lambda D, t: D.Normal(t.zeros(3), 1.0).log_prob(t.ones(2)),
    lambda D, t: D.Categorical(probs=t.tensor([0.5, 0.5])).log_prob(t.tensor(3)),
    lambda D, t: D.Bernoulli(probs=0.5).log_prob(t.tensor(0.5)),
    lambda D, t: D.Exponential(1.0).log_prob(t.tensor(-1.0)),
    lambda D, t: D.Independent(D.Normal(t.zeros(2, 3), 1.0), 1).log_prob(t.zeros(2, 4)),
    lambda D, t: D.Normal(0.0, 1.0).log_prob(0.5),
    lambda D, t: D.Gamma(t.tensor([1.0, -1.0]), 1.0),
    lambda D, t: D.MultivariateNormal(t.zeros(2)),
    lambda D, t: D.MultivariateNormal(t.zeros(2), scale_tril=t.eye(2), covariance_matrix=t.eye(2)),
    lambda D, t: D.MultivariateNormal(t.tensor(0.0), t.eye(2)),
    lambda D, t: D.MultivariateNormal(t.zeros(2), scale_tril=t.tensor([[1.0, 0.0], [0.5, -1.0]])),
    lambda D, t: D.MultivariateNormal(t.zeros(2), t.tensor([[1.0, 2.0], [2.0, 1.0]])),
]


@pytest.mark.parametrize("i", range(len(ERRORS)))
def test_validate_args_errors_match_torch(i):
    assert _first_line(ERRORS[i], ng) == _first_line(ERRORS[i], torch)


def test_beta_validation():
    # torch words these through its Dirichlet, so only the error type is compared
    with pytest.raises(ValueError, match="concentration0"):
        ND.Beta(1.0, ng.tensor([0.0, 2.0]))
    with pytest.raises(ValueError, match="support"):
        ND.Beta(2.0, 2.0).log_prob(ng.tensor([1.5, 0.5]))


def test_validate_args_off():
    assert ND.Normal(0.0, -1.0, validate_args=False).scale.item() == -1.0
    ND.Distribution.set_default_validate_args(False)
    try:
        ND.Uniform(1.0, 0.0)
    finally:
        ND.Distribution.set_default_validate_args(True)
    with pytest.raises(ValueError):
        ND.Uniform(1.0, 0.0)
