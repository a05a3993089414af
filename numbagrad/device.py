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
        kind, _, idx = spec.partition(":")
        if kind not in ("cpu", "cuda"):
            raise ValueError(f"device: unknown device type {kind!r} in {spec!r}; expected 'cpu' or 'cuda[:N]'")
        self.type = kind
        self.index = int(idx) if idx else index
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
