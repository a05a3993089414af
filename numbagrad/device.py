"""Device names. A tensor's device is a :class:`device`; it compares equal to its string."""


class device:
    """A device such as ``device("cpu")`` or ``device("cuda:0")`` (PyTorch's spelling)."""

    __slots__ = ("type", "index")

    def __init__(self, spec="cpu", index=None):
        if isinstance(spec, device):
            self.type, self.index = spec.type, spec.index
            return
        if not isinstance(spec, str):
            raise TypeError(f"device: expected a string like 'cpu' or 'cuda:0', got {spec!r}")
        kind, colon, idx = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"device: unknown device type {kind!r} in {spec!r}; expected 'cpu' or 'cuda[:N]'")
        # PyTorch's grammar: the index is a non-negative decimal without leading zeros
        if colon and not (idx.isascii() and idx.isdigit() and (idx == "0" or idx[0] != "0")):
            raise RuntimeError(f"device: Invalid device string: {spec!r} (expected 'cpu' or 'cuda[:N]')")
        if index is not None:
            if isinstance(index, bool) or not isinstance(index, int):
                raise TypeError(f"device: argument 'index' must be int, got {type(index).__name__} {index!r}")
            if index < 0:
                raise RuntimeError(f"device: Device index must not be negative, got {index}")
            if colon:
                raise RuntimeError(f"device: type (string) must not include an index because index was "
                                   f"passed explicitly: {spec!r}")
        self.type = kind
        self.index = int(idx) if colon else index
        if kind == "cuda" and self.index is None:
            self.index = 0

    def __str__(self):
        return self.type if self.index is None or self.type == "cpu" else f"{self.type}:{self.index}"

    def __repr__(self):
        return f"device(type='{self.type}'" + ("" if self.type == "cpu" else f", index={self.index}") + ")"

    def __eq__(self, other):
        if isinstance(other, str):
            other = device(other)
        if not isinstance(other, device):
            return NotImplemented
        return self.type == other.type and (self.type == "cpu" or self.index == other.index)

    def __hash__(self):
        return hash(str(self))


CPU = device("cpu")
