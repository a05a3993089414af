"""Parameter counts of a Module: :func:`count_parameters` and a readable :func:`summary` table.

Neither runs the model: the table lists every submodule (in ``named_modules`` order) with
the parameters it owns directly (name and shape), their element count and whether they
are trainable (``requires_grad``), then the totals. A parameter shared by several
modules is counted once, at its first owner; later owners show it as shared. Buffers
(running statistics and the like) are not parameters: their element count is given on
a separate line when there are any.
"""
__all__ = ["summary", "count_parameters"]


def count_parameters(module, trainable_only=False):
    """Number of parameter elements of ``module`` (each shared parameter once); with
    ``trainable_only``, only those that require grad."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def _shape(p):
    return "(" + ", ".join(str(d) for d in p.shape) + ("," if p.ndim == 1 else "") + ")"


def summary(module, max_width=110):
    """A table (a string) of ``module``'s layers, parameter shapes and counts, trainable
    and frozen, with totals. Long parameter lists are cut at ``max_width`` characters."""
    header = ("Layer", "Type", "Parameters", "Count", "Trainable")
    rows = []
    first_owner = {}
    total = trainable = 0
    for name, m in module.named_modules():
        params, count, n_train, n_frozen = [], 0, 0, 0
        for pname, p in m._parameters.items():
            if p is None:
                continue
            full = f"{name}.{pname}" if name else pname
            owner = first_owner.get(id(p))
            if owner is not None:
                params.append(f"{pname} {_shape(p)} = {owner}")
                continue
            first_owner[id(p)] = full
            params.append(f"{pname} {_shape(p)}")
            n = p.numel()
            count += n
            if p.requires_grad:
                n_train += n
            else:
                n_frozen += n
        total += count
        trainable += n_train
        if n_train and n_frozen:
            state = "partly"
        elif n_train:
            state = "yes"
        elif n_frozen:
            state = "no"
        else:
            state = "-"
        rows.append((name or "(root)", type(m).__name__, ", ".join(params) or "-", f"{count:,}", state))
    widths = [max(len(r[k]) for r in rows + [header]) for k in range(5)]
    room = max_width - (sum(widths) - widths[2]) - 8
    if widths[2] > room > 10:
        widths[2] = room
        rows = [r[:2] + ((r[2] if len(r[2]) <= room else r[2][:room - 3] + "..."),) + r[3:] for r in rows]

    def line(r):
        cells = [r[0].ljust(widths[0]), r[1].ljust(widths[1]), r[2].ljust(widths[2]), r[3].rjust(widths[3]),
                 r[4].ljust(widths[4])]
        return "  ".join(cells).rstrip()

    rule = "-" * len(line(tuple("-" * w for w in widths)))
    out = [line(header), rule] + [line(r) for r in rows] + [rule]
    out.append(f"Total params: {total:,}")
    out.append(f"Trainable params: {trainable:,}")
    out.append(f"Non-trainable params: {total - trainable:,}")
    nbuf = sum(b.numel() for b in module.buffers())
    if nbuf:
        out.append(f"Buffer elements (not parameters): {nbuf:,}")
    return "\n".join(out)
