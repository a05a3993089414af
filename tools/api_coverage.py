"""Compare numbagrad's public names with PyTorch's, namespace by namespace, and write the
table ``docs/api_coverage.md``. Run where torch is installed:

    python tools/api_coverage.py            # rewrite docs/api_coverage.md
    python tools/api_coverage.py --check    # exit 1 if the file is out of date

Each public name (no leading underscore) of the torch namespaces below is one of:

* **present**: numbagrad's counterpart namespace has the attribute;
* **out of scope**: matched by a rule of ``OUT_OF_SCOPE`` (sparse layouts, quantization,
  complex numbers, FX/JIT/compile, other device kinds, storage internals...), or a class
  of ``torch._C`` (C++ bindings, TorchScript types), each with its reason: numbagrad will
  not grow these;

Names a namespace merely imports from elsewhere (``typing.Optional``, ``math``...) are
not counted.
* **missing**: everything else, still to build.

``COMMON`` lists the names typical training programs use (tutorial classifiers, language
models, GANs, VAEs, transformers, the optimizers and schedulers); the table reports the
share of them numbagrad has, and every missing one by name.
"""
import argparse
import importlib
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "docs", "api_coverage.md")

NAMESPACES = [("torch", "numbagrad"), ("torch.Tensor", "numbagrad.Tensor"), ("torch.nn", "numbagrad.nn"),
              ("torch.nn.functional", "numbagrad.nn.functional"), ("torch.nn.init", "numbagrad.nn.init"),
              ("torch.optim", "numbagrad.optim"), ("torch.optim.lr_scheduler", "numbagrad.optim.lr_scheduler"),
              ("torch.utils.data", "numbagrad.data"), ("torch.autograd", "numbagrad.autograd"),
              ("torch.special", "numbagrad.special"), ("torch.linalg", "numbagrad.linalg"),
              ("torch.distributions", "numbagrad.distributions")]

# (regex on the name, reason); the first match wins
OUT_OF_SCOPE = [
    (r"sparse|coo|csr|csc|bsr|bsc|to_dense|_nnz|indices$|values$|crow|ccol|row_indices|col_indices",
     "sparse layouts: numbagrad tensors are dense NumPy or device arrays"),
    (r"quant|qint|quint|qscheme|q_scale|q_zero|q_per_channel|int_repr|fake_|fbgemm|dequantize|qr_?$",
     "quantization: not a goal of a float training framework on NumPy"),
    (r"complex|conj|^real$|^imag$|angle|polar|view_as_real|chalf|cfloat|cdouble|is_neg|resolve_neg",
     "complex numbers: numbagrad's kernels are real-valued"),
    (r"^jit$|script|^trace|^fx$|compile|dynamo|^export$|onnx|inductor|^library$|^ops$|^classes$|overrides|"
     r"^func$|vmap|functorch|^compiler$|^package$|^hub$|^testing$|^profiler$|^monitor$|^masked$|^nested$",
     "compilers, FX/JIT, graph export and framework internals: numbagrad runs eagerly through Numba kernels"),
    (r"storage|data_ptr|untyped|is_shared|share_memory|pin_memory|is_pinned|record_stream|mkldnn|vulkan|"
     r"xpu|mps|hpu|ipu|mtia|privateuse|miopen|cudnn|native_|_foreach|ipc|^has_|^is_vulkan|^is_mkldnn|"
     r"^set_flush_denormal|^use_deterministic|deterministic_algorithms|warn_always|^get_device_module$|"
     r"^DisableTorchFunction|TorchFunction|TorchDispatch|^SymInt|^SymFloat|^SymBool|^sym_|^Sym|^Stream|"
     r"^Event$|^Graph|cuda_graph|^AcceleratorError|^OutOfMemoryError|_guard|^autocast_|^is_autocast|"
     r"^set_autocast|^get_autocast|^clear_autocast|^smm$|^dsmm$|^hsmm$|^saddmm$|^sspaddmm$|^frombuffer$|"
     r"^from_file$|^from_dlpack$|^to_dlpack$|dlpack|^_?Typed|^ByteStorage|Storage$|Tensor$|^layout$|^strided$|"
     r"^memory_format$|_format$|^channels_last|^preserve_format|^contiguous_format|^device_of$|^unravel_index$|"
     r"^align_|names$|^rename|^refine_names|^is_inference$|^is_nonzero$|^nbytes$|^itemsize$|^is_meta$",
     "device kinds, storage and dispatch internals numbagrad does not have"),
    (r"float8|^bits|uint16|uint32|uint64|int1$|int2$|int3$|int4$|int5$|int6$|int7$|uint1|uint2|uint3|uint4|"
     r"uint5|uint6|uint7|^qint|^quint|^e4m3|^e5m2|float4",
     "dtypes NumPy has no arithmetic for"),
]

# Why an in-scope name is still missing: (regex on the name, reason); the first match wins,
# the last rule catches the rest. Nothing here is ruled out.
MISSING_REASONS = [
    (r"^(linalg|cholesky|lu|qr|svd|eig|det|logdet|slogdet|inverse|pinverse|matrix_|solve|triangular_solve|"
     r"lstsq|ger$|addr|addmm|addmv|addbmm|baddbmm|chain_matmul|kron|tensordot|inner|vdot|mv$|cdist|pdist|trace|"
     r"diag|tril_indices|triu_indices|block_diag|cross|orgqr|ormqr|geqrf|lobpcg|pca_lowrank|svd_lowrank|"
     r"cartesian_prod|combinations|mT$|mH$|^H$|^T$|adjoint)",
     "linear algebra beyond matmul/bmm/einsum: not built yet (BLAS/LAPACK-backed ops with gradients)"),
    (r"(window|stft|istft|fft|conv_tbc|conv3d|conv_transpose3d|3d$|fold|unfold|grid_sample|affine_grid|"
     r"embedding_renorm|pixel_|channel_shuffle|upsample|fractional|lp_pool|lppool|max_unpool|pad\dd)",
     "signal processing, 3-D layers and less common spatial ops: not built yet"),
    (r"^(a?(sin|cos|tan)h?_?$|arc|atan2|hypot|lgamma|digamma|polygamma|erf|i0|sinc|logit|xlogy|mvlgamma|"
     r"igamma|frexp|ldexp|nextafter|copysign|fmod|float_power|true_divide|gcd|lcm|logaddexp|deg2rad|rad2deg|"
     r"frac|fix|positive|negative|heaviside|addcdiv|addcmul|lerp|rsub|square_|sgn|signbit|nan_to_num|"
     r"clamp_min_|clamp_max_|absolute|subtract|multiply|divide|greater|less|not_equal)",
     "elementwise math not built yet: each op needs its CPU kernel, CUDA twin and backward"),
    (r"(bitwise_|bincount|histc|histogram|count_nonzero|bucketize_|searchsorted_|aminmax|cummax|cummin|"
     r"cumprod|logcumsumexp|nanmean|nansum|nanmedian|median|^mode$|quantile|nanquantile|std_mean|var_mean|"
     r"renorm|^dist$|^diff$|^gradient$|trapz|trapezoid|cumulative_trapezoid)",
     "reductions, scans and counting ops not built yet"),
    (r"(random_|exponential_|geometric_|cauchy_|log_normal_|binomial|_sample|bernoulli_|normal_|poisson_|"
     r"rng_state|fork_rng|seed)",
     "further random sampling and generator utilities: not built yet"),
    (r"(Lazy|Buffer|Container|Adaptive.*3d|Pad\dd|Fold|Unfold|ChannelShuffle|CrossMap|LocalResponse|"
     r"Softmax2d|Softmin|Hardshrink|Softshrink|Tanhshrink|Threshold|GLU|RReLU|AdaptiveLogSoftmax|"
     r"MultiLabel|MarginRanking|SoftMargin|NLLLoss2d|GaussianNLL|PoissonNLL|Module|Dist|Data)",
     "layers, losses and parallel/distributed pieces not built yet"),
    (r".", "not built yet"),
]


def _missing_reason(name):
    for pattern, why in MISSING_REASONS:
        if re.search(pattern, name):
            return why


# Names typical training programs use (see the module docstring).
COMMON = {
    "torch": """tensor from_numpy as_tensor zeros ones full empty zeros_like ones_like full_like empty_like
        arange linspace eye rand randn randint randperm rand_like randn_like randint_like manual_seed seed
        initial_seed cat stack split chunk squeeze unsqueeze reshape flatten transpose permute where clamp
        clip abs exp log sqrt rsqrt sin cos tanh sigmoid relu softmax log_softmax sum mean std var max min
        argmax argmin amax amin prod cumsum matmul mm bmm einsum outer dot norm topk sort argsort
        multinomial bernoulli normal tril triu no_grad enable_grad set_grad_enabled inference_mode
        is_tensor is_grad_enabled float32 float64 float16 int64 int32 int8 uint8 bool long float double half
        dtype device Generator get_default_dtype set_default_dtype allclose equal isnan isinf isfinite
        logsumexp maximum minimum pow floor ceil round sign gather scatter index_select masked_select
        nonzero unique searchsorted bucketize numel save load cuda backends accelerator optim nn autograd
        utils distributed amp Tensor Size float int""",
    "torch.Tensor": """backward detach detach_ item tolist numpy cpu cuda to size shape dim ndim numel dtype
        device requires_grad requires_grad_ grad grad_fn is_leaf data view view_as reshape flatten
        squeeze unsqueeze permute transpose t contiguous clone expand expand_as repeat sum mean std var
        max min argmax argmin softmax log_softmax exp log sqrt pow abs clamp clamp_ add add_ sub sub_ mul
        mul_ div div_ zero_ fill_ copy_ normal_ uniform_ masked_fill masked_fill_ gather scatter_ index_select
        float double half long int bool type type_as new_zeros new_ones new_full new_empty new_tensor
        eq ne lt le gt ge all any topk sort argsort chunk split unbind tril triu matmul bmm norm
        is_cuda is_contiguous element_size nelement register_hook retain_grad apply_ multinomial""",
    "torch.nn": """Module Parameter Sequential ModuleList ModuleDict ParameterList ParameterDict Linear
        Conv1d Conv2d ConvTranspose1d ConvTranspose2d MaxPool1d MaxPool2d AvgPool2d AdaptiveAvgPool2d
        BatchNorm1d BatchNorm2d LayerNorm GroupNorm Dropout Dropout2d Embedding LSTM GRU RNN LSTMCell
        GRUCell MultiheadAttention TransformerEncoder TransformerEncoderLayer TransformerDecoderLayer
        Transformer ReLU LeakyReLU GELU SiLU Tanh Sigmoid Softmax LogSoftmax ELU Identity Flatten Unflatten
        CrossEntropyLoss NLLLoss MSELoss L1Loss BCELoss BCEWithLogitsLoss SmoothL1Loss HuberLoss KLDivLoss
        CTCLoss TripletMarginLoss CosineEmbeddingLoss PixelShuffle Upsample functional init utils
        parameter modules parallel DataParallel""",
    "torch.nn.functional": """relu leaky_relu gelu silu elu tanh sigmoid softmax log_softmax dropout
        linear conv1d conv2d conv_transpose2d max_pool2d avg_pool2d adaptive_avg_pool2d batch_norm
        layer_norm group_norm embedding one_hot pad interpolate cross_entropy nll_loss mse_loss l1_loss
        binary_cross_entropy binary_cross_entropy_with_logits smooth_l1_loss kl_div ctc_loss
        triplet_margin_loss cosine_similarity normalize scaled_dot_product_attention pixel_shuffle
        softplus hardtanh mish""",
    "torch.nn.init": """normal_ uniform_ zeros_ ones_ constant_ xavier_uniform_ xavier_normal_
        kaiming_uniform_ kaiming_normal_ orthogonal_ trunc_normal_ calculate_gain eye_""",
    "torch.optim": """Optimizer SGD Adam AdamW RMSprop Adagrad Adadelta Adamax NAdam RAdam LBFGS lr_scheduler
        swa_utils""",
    "torch.optim.lr_scheduler": """LRScheduler StepLR MultiStepLR ExponentialLR CosineAnnealingLR
        CosineAnnealingWarmRestarts ReduceLROnPlateau OneCycleLR CyclicLR LambdaLR LinearLR SequentialLR
        ChainedScheduler PolynomialLR ConstantLR MultiplicativeLR""",
    "torch.utils.data": """Dataset DataLoader TensorDataset Subset random_split ConcatDataset
        IterableDataset Sampler RandomSampler SequentialSampler BatchSampler SubsetRandomSampler
        WeightedRandomSampler default_collate get_worker_info""",
    "torch.autograd": """grad backward Function no_grad enable_grad set_grad_enabled gradcheck
        detect_anomaly set_detect_anomaly""",
    "torch.distributions": """Distribution Normal Categorical Bernoulli Uniform Independent MultivariateNormal
        kl_divergence OneHotCategorical Beta Gamma Exponential Laplace""",
    "torch.linalg": """norm vector_norm matrix_norm det slogdet inv solve cholesky qr svd svdvals eigh eigvalsh
        pinv matrix_rank lstsq matrix_power multi_dot cross""",
    "torch.special": """expit logit erf erfc erfinv gammaln digamma xlogy log1p expm1 exp2 logsumexp softmax
        log_softmax i0 sinc entr ndtr""",
}


def _obj(path):
    mod, _, attr = path.partition(".Tensor")
    m = importlib.import_module(mod)
    return getattr(m, "Tensor") if path.endswith(".Tensor") else m


_FOREIGN = ("typing", "typing_extensions", "collections", "functools", "math", "builtins", "enum", "abc",
            "warnings", "dataclasses", "contextlib", "numbers", "types", "inspect", "itertools")
_BINDINGS = "C++ binding and TorchScript types (``torch._C``): not part of an eager training API"


def _foreign(obj, path):
    """Names a namespace merely imported (``typing.Optional``, ``functools.partial``, the
    ``math`` module, ``torch`` itself inside ``torch.nn.init``...): not its API, not counted."""
    import inspect
    if inspect.ismodule(obj):
        return not obj.__name__.startswith(path.replace(".Tensor", "") + ".")
    mod = getattr(obj, "__module__", None) or ""
    return mod.split(".")[0] in _FOREIGN


def _reason(name, obj=None):
    for pattern, why in OUT_OF_SCOPE:
        if re.search(pattern, name):
            return why
    if isinstance(obj, type) and ((getattr(obj, "__module__", "") or "").startswith("torch._C")
                                  or type(obj).__name__ == "pybind11_type") or \
            type(type(obj)).__name__ == "pybind11_type":  # a pybind11 class, or an instance of one
        return _BINDINGS
    return None


def survey():
    """Per namespace: dict(total, present, missing, out={reason: [names]}, common, common_missing)."""
    rows = []
    for tpath, npath in NAMESPACES:
        tobj, nobj = _obj(tpath), _obj(npath)
        names = sorted(n for n in dir(tobj) if not n.startswith("_") and not _foreign(getattr(tobj, n, None), tpath))
        present, missing, out = [], [], {}
        for n in names:
            why = _reason(n, getattr(tobj, n, None))
            if hasattr(nobj, n):
                present.append(n)
            elif why:
                out.setdefault(why, []).append(n)
            else:
                missing.append(n)
        common = sorted(set(COMMON[tpath].split()) & set(names))
        rows.append(dict(torch=tpath, numbagrad=npath, total=len(names), present=present, missing=missing,
                         out=out, common=common, common_missing=[n for n in common if not hasattr(nobj, n)]))
    return rows


def render(rows, torch_version):
    pct = lambda a, b: f"{100.0 * a / b:.0f}%" if b else "–"  # noqa: E731
    lines = ["# PyTorch API coverage", "",
             f"Generated by `python tools/api_coverage.py` against torch {torch_version}; "
             "`--check` fails when this file is out of date. Public names are those without a leading "
             "underscore. *Common* names are the ones typical training programs use (`COMMON` in the "
             "tool); *out of scope* names match a rule of `OUT_OF_SCOPE`, each with its reason below.", "",
             "| torch namespace | numbagrad | public names | out of scope | in scope | present | "
             "in-scope coverage | common names | common present |",
             "|---|---|---|---|---|---|---|---|---|"]
    tc = tp = 0
    for r in rows:
        n_out = sum(len(v) for v in r["out"].values())
        in_scope = r["total"] - n_out
        cp = len(r["common"]) - len(r["common_missing"])
        tc, tp = tc + len(r["common"]), tp + cp
        lines.append(f"| `{r['torch']}` | `{r['numbagrad']}` | {r['total']} | {n_out} | {in_scope} | "
                     f"{len(r['present'])} | {pct(len(r['present']), in_scope)} | {len(r['common'])} | "
                     f"{cp} ({pct(cp, len(r['common']))}) |")
    lines += ["", f"**Common names present: {tp} of {tc} ({pct(tp, tc)}).**", "",
              "## Common names still missing", ""]
    for r in rows:
        if r["common_missing"]:
            lines.append(f"- `{r['torch']}`: " + ", ".join(f"`{n}`" for n in r["common_missing"]))
    lines += ["", "## Every missing in-scope name, with the reason", "",
              "Nothing here is ruled out: each is waiting to be built (`MISSING_REASONS` in the tool says which "
              "kind of work it needs).", ""]
    for r in rows:
        lines.append(f"### `{r['torch']}` ({len(r['missing'])} missing)")
        lines.append("")
        by = {}
        for n in r["missing"]:
            by.setdefault(_missing_reason(n), []).append(n)
        for _, why in MISSING_REASONS:
            if why in by:
                lines.append(f"- **{why}** ({len(by[why])}): " + ", ".join(f"`{n}`" for n in by[why]))
        if not by:
            lines.append("- none")
        lines.append("")
    lines += ["", "## Out of scope, with the reason", ""]
    for why in [w for _, w in OUT_OF_SCOPE] + [_BINDINGS]:
        names = [f"`{r['torch']}.{n}`" if r["torch"] != "torch" else f"`torch.{n}`"
                 for r in rows for n in r["out"].get(why, [])]
        lines.append(f"- **{why}** ({len(names)}): " + (", ".join(names) or "none"))
    return "\n".join(lines) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check", action="store_true", help="exit 1 if docs/api_coverage.md is out of date")
    args = ap.parse_args(argv)
    import torch
    sys.path.insert(0, ROOT)
    text = render(survey(), torch.__version__)
    if args.check:
        with open(OUT) as f:
            ok = f.read() == text
        print("docs/api_coverage.md is " + ("up to date" if ok else "out of date: run python tools/api_coverage.py"))
        return 0 if ok else 1
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    tmp = OUT + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, OUT)
    print(f"wrote {os.path.relpath(OUT, ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
