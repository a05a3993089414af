"""Plain NumPy references for shape ops whose arguments NumPy spells differently."""
import numpy as np


def pad(x, p, mode="constant", value=0.0):
    """``torch.nn.functional.pad``: ``p`` pairs (before, after) from the last dim backwards."""
    widths = [(0, 0)] * x.ndim
    for i in range(len(p) // 2):
        widths[x.ndim - 1 - i] = (p[2 * i], p[2 * i + 1])
    if mode == "constant":
        return np.pad(x, widths, constant_values=value)
    return np.pad(x, widths, mode={"reflect": "reflect", "replicate": "edge", "circular": "wrap"}[mode])
