"""Bad-input rows (``tests/test_bad_input.py``) for ``numbagrad/ops/nn_extra.py`` (unfold, fold,
local_response_norm, soft_margin_loss, multilabel_margin_loss, channel_shuffle) and the padding
layers of ``numbagrad/nn/padding.py``."""


def add(row, dim_rows, f32, i64):
    """Add this family's rows: ``row(covers, call, exc, fragment, torch=True)`` as documented in
    test_bad_input.py; ``f32(lib, *shape)`` / ``i64(lib, *values, shape=None)`` make inputs."""
    def F(t):
        return t.nn.functional

    # -- unfold / fold: ranks, empty dims, geometry, sizes that do not match the blocks
    row("unfold", lambda t: F(t).unfold(f32(t, 2, 3, 4, 5), (2, 3)), None)
    row("unfold", lambda t: F(t).unfold(f32(t, 3, 4, 5), 2, padding=1, stride=2), None)   # unbatched
    row("unfold", lambda t: F(t).unfold(f32(t, 0, 3, 4, 5), 2), None)                     # empty batch
    row("unfold", lambda t: F(t).unfold(f32(t, 1, 2, 3, 4, 5), 2), RuntimeError, "Expected 3D or 4D (batch mode)")
    row("unfold", lambda t: F(t).unfold(f32(t, 2, 0, 4, 5), 2), RuntimeError, "non-zero dimensions")
    row("unfold", lambda t: F(t).unfold(f32(t, 2, 3, 4, 5), (5, 3)), RuntimeError,
        "calculated shape of the array of sliding blocks as (0, 3), but its components must be at least one")
    row("unfold", lambda t: F(t).unfold(f32(t, 2, 3, 4, 5), (0, 3)), RuntimeError,
        "kernel size should be greater than zero")
    row("unfold", lambda t: F(t).unfold(f32(t, 2, 3, 4, 5), 2, stride=0), RuntimeError,
        "stride should be greater than zero")
    row("unfold", lambda t: F(t).unfold(f32(t, 2, 3, 4, 5), 2, dilation=(1, 0)), RuntimeError,
        "dilation should be greater than zero")
    row("unfold", lambda t: F(t).unfold(f32(t, 2, 3, 4, 5), 2, padding=-1), RuntimeError,
        "padding should be non-negative")
    row("unfold", lambda t: F(t).unfold(f32(t, 2, 3, 4, 5), (2, 3, 4)), RuntimeError,
        "It is expected kernel_size equals to 2, but got size 3")
    row("unfold", lambda t: F(t).unfold(i64(t, *range(8), shape=(1, 2, 2, 2)), 2), NotImplementedError,
        "not implemented for dtype int64")
    row("fold", lambda t: F(t).fold(f32(t, 2, 12, 6), (3, 4), 2), None)
    row("fold", lambda t: F(t).fold(f32(t, 12, 6), (3, 4), 2), None)                       # unbatched
    row("fold", lambda t: F(t).fold(f32(t, 12), (3, 4), 2), RuntimeError, "Expected 2D or 3D (batch mode)")
    row("fold", lambda t: F(t).fold(f32(t, 2, 12, 5), (3, 4), 2), RuntimeError,
        "expected size of input's dimension 2 to match the calculated number of sliding blocks 2 * 3 = 6, "
        "but got input.size(2)=5")
    row("fold", lambda t: F(t).fold(f32(t, 2, 13, 6), (3, 4), 2), RuntimeError,
        "Expected size of input's dimension 1 to be divisible by the product of kernel_size, but got "
        "input.size(1)=13 and kernel_size=(2, 2)")
    row("fold", lambda t: F(t).fold(f32(t, 2, 12, 6), (1, 4), 2), RuntimeError,
        "calculated number of sliding blocks 0 * 3 = 0")
    row("fold", lambda t: F(t).fold(f32(t, 2, 12, 6), (3, 4, 5), 2), RuntimeError,
        "It is expected output_size equals to 2, but got size 3")
    row("fold", lambda t: F(t).fold(f32(t, 2, 12, 6), (3, 4), 2, stride=0), RuntimeError,
        "stride should be greater than zero")
    row("fold", lambda t: F(t).fold(f32(t, 2, 0, 6), (3, 4), 2), RuntimeError, "non-zero dimensions")

    # -- local_response_norm
    row("local_response_norm", lambda t: F(t).local_response_norm(f32(t, 2, 3, 4), 2), None)
    row("local_response_norm", lambda t: F(t).local_response_norm(f32(t, 0, 3, 4), 2), None)
    row("local_response_norm", lambda t: F(t).local_response_norm(f32(t, 2, 3), 2), ValueError,
        "Expected 3D or higher dimensionality input (got 2 dimensions)")
    row("local_response_norm", lambda t: F(t).local_response_norm(f32(t, 2, 3, 4), 0), RuntimeError,
        "kernel size should be greater than zero")

    # -- soft_margin_loss
    row("soft_margin_loss", lambda t: F(t).soft_margin_loss(f32(t, 3, 4), f32(t, 4)), None)   # broadcast
    row("soft_margin_loss", lambda t: F(t).soft_margin_loss(f32(t, 3, 4), f32(t, 3, 5)), RuntimeError,
        "are not broadcastable")
    row("soft_margin_loss", lambda t: F(t).soft_margin_loss(f32(t, 3, 4), f32(t, 3, 4), reduction="bad"),
        ValueError, "reduction='bad' is not valid")
    row("soft_margin_loss", lambda t: F(t).soft_margin_loss(f32(t), f32(t)), None)            # 0-d

    # -- multilabel_margin_loss: targets are int64 class indices ending at the first -1
    row("multilabel_margin_loss", lambda t: F(t).multilabel_margin_loss(f32(t, 2, 4), i64(t, 3, 0, -1, 1, 1, 2, 3, 0,
                                                                                          shape=(2, 4))), None)
    row("multilabel_margin_loss", lambda t: F(t).multilabel_margin_loss(f32(t, 4), i64(t, 3, -1, 9, 1)),
        RuntimeError, "argument #2 'target' is out of range")
    row("multilabel_margin_loss", lambda t: F(t).multilabel_margin_loss(f32(t, 4), i64(t, 3, -2, 0, 1)),
        RuntimeError, "argument #2 'target' is out of range")
    row("multilabel_margin_loss", lambda t: F(t).multilabel_margin_loss(f32(t, 2, 4), i64(t, 0, 1, 2,
                                                                                          shape=(1, 3))),
        RuntimeError, "inconsistent target size: [1, 3] for input of size: [2, 4]")
    row("multilabel_margin_loss", lambda t: F(t).multilabel_margin_loss(f32(t, 4), f32(t, 4)), RuntimeError,
        "expected scalar type Long")
    row("multilabel_margin_loss", lambda t: F(t).multilabel_margin_loss(f32(t, 2, 3, 4), i64(t, *[0] * 24,
                                                                                             shape=(2, 3, 4))),
        RuntimeError, "Expected non-empty vector or matrix with optional 0-dim batch size, but got: [2, 3, 4]")
    row("multilabel_margin_loss", lambda t: F(t).multilabel_margin_loss(f32(t, 2, 0), i64(t, shape=(2, 0))),
        RuntimeError, "Expected non-empty vector or matrix")
    row("multilabel_margin_loss", lambda t: F(t).multilabel_margin_loss(f32(t), i64(t, 0, shape=())), None)

    # -- channel_shuffle
    row("channel_shuffle", lambda t: F(t).channel_shuffle(f32(t, 2, 6, 3), 3), None)
    row("channel_shuffle", lambda t: F(t).channel_shuffle(f32(t, 2, 6, 3), 0), RuntimeError,
        "Number of groups to divide channels in must be positive. Value of groups:0")
    row("channel_shuffle", lambda t: F(t).channel_shuffle(f32(t, 2, 6, 3), 4), RuntimeError,
        "Number of channels must be divisible by groups. Got 6 channels and 4 groups.")
    row("channel_shuffle", lambda t: F(t).channel_shuffle(f32(t, 2, 6), 2), RuntimeError,
        "channel_shuffle expects input with > 2 dims, but got input with sizes [2, 6]")
    row("channel_shuffle", lambda t: F(t).channel_shuffle(f32(t, 2, 6, 3), 2.0), TypeError,
        "argument 'groups' must be int")

    # -- the padding layers: ranks they refuse, as torch
    row("ReflectionPad2d", lambda t: t.nn.ReflectionPad2d(1)(f32(t, 3, 3)), NotImplementedError,
        "Padding size 4 is not supported for 2D input tensor")
    row("ReplicationPad1d", lambda t: t.nn.ReplicationPad1d(1)(f32(t, 1, 2, 3, 3)), NotImplementedError,
        "Padding size 2 is not supported for 4D input tensor")
    row("CircularPad3d", lambda t: t.nn.CircularPad3d(1)(f32(t, 2, 3, 3)), ValueError,
        "expected 4D or 5D input (got 3D input)")
    row("ZeroPad3d", lambda t: t.nn.ZeroPad3d(1)(f32(t, 3, 3)), RuntimeError,
        "Padding length should be less than or equal to two times the input dimension but got padding length 6 "
        "and input of dimension 2")
    row("ConstantPad1d", lambda t: t.nn.ConstantPad1d((1, 2), 3.0)(f32(t, 4)), None)
