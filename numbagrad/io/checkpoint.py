"""Module checkpoints with a structural check.

A module checkpoint is a :func:`~numbagrad.io.save` file holding::

    {"kind": "numbagrad.module_checkpoint", "structure_hash": <hex>,
     "architecture": [[module path, class name], ...],
     "parameters": {name: tensor}, "buffers": {name: tensor}, "extra": <anything savable>}

The structural hash is SHA-256 over the module types in ``named_modules`` order and the
names and shapes of the parameters and persistent buffers (not their dtypes, so a model
moved to float64 keeps its hash). :func:`load_checkpoint` checks the hash and every
shape, then copies what matches; the :class:`LoadReport` says what was ``loaded``,
``skipped`` (in the file, not in the model, or with another shape) and ``missing`` (in
the model, not in the file). With ``strict=True`` any difference raises
:class:`CheckpointMismatch` before a single value is copied.
"""
import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from ..autograd import no_grad
from ..nn.module import Module
from ..tensor import Tensor
from ._format import load, save
from .errors import CheckpointError

KIND = "numbagrad.module_checkpoint"


class CheckpointMismatch(RuntimeError):
    """A strict load found the checkpoint and the model differ (``.report`` says how)."""

    def __init__(self, message, report):
        super().__init__(message)
        self.report = report


@dataclass
class LoadReport:
    """What :func:`load_checkpoint` did: names ``loaded``; ``skipped`` (in the file but
    not in the model, or with another shape: ``mismatched`` lists those as
    ``(name, file shape, model shape)``); ``missing`` (in the model, not in the file);
    and whether the structural hashes matched (None when there was nothing to compare)."""
    loaded: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    missing: list = field(default_factory=list)
    mismatched: list = field(default_factory=list)
    hash_matches: object = None
    file_hash: str = None
    expected_hash: str = None

    @property
    def not_loaded(self):
        """The model's names that kept their values: ``missing`` plus the ``mismatched``."""
        return self.missing + [m[0] for m in self.mismatched]

    @property
    def complete(self):
        return not (self.skipped or self.missing) and self.hash_matches is not False

    def __str__(self):
        lines = [f"loaded {len(self.loaded)}, skipped {len(self.skipped)}, missing {len(self.missing)}"]
        if self.hash_matches is False:
            lines.append(f"structure hash differs: file {self.file_hash[:12]}..., model {self.expected_hash[:12]}...")
        for n, fs, ms in self.mismatched:
            lines.append(f"shape of {n!r}: file {fs}, model {ms}")
        extra = [n for n in self.skipped if n not in {m[0] for m in self.mismatched}]
        if extra:
            lines.append("in the file, not in the model: " + ", ".join(extra))
        if self.missing:
            lines.append("in the model, not in the file: " + ", ".join(self.missing))
        return "\n".join(lines)


def _persistent_buffers(module):
    for prefix, m in module.named_modules():
        skip = m.__dict__.get("_non_persistent_buffers_set", set())
        for name, b in m._buffers.items():
            if b is not None and name not in skip:
                yield (prefix + "." if prefix else "") + name, b


def architecture(module):
    """``[[module path, class name], ...]`` in ``named_modules`` order."""
    return [[name, type(m).__qualname__] for name, m in module.named_modules()]


def structure_hash(named_parameters, named_buffers=(), architecture=None):
    """SHA-256 (hex) of the architecture (if given) and the names and shapes of the
    parameters and buffers."""
    doc = {"architecture": architecture or [],
           "parameters": [[n, list(t.shape)] for n, t in _pairs(named_parameters)],
           "buffers": [[n, list(t.shape)] for n, t in _pairs(named_buffers)]}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()


def module_structure_hash(module):
    """SHA-256 (hex) of ``module``'s architecture and the names and shapes of its parameters and
    persistent buffers: what ``Module.save_checkpoint`` stores and ``load_checkpoint`` checks.
    """
    return structure_hash(module.named_parameters(), _persistent_buffers(module), architecture(module))


def _pairs(named):
    items = named.items() if hasattr(named, "items") else named
    out = []
    for item in items:
        try:
            n, t = item
        except (TypeError, ValueError):
            raise TypeError(f"expected (name, tensor) pairs or a dict, got an item {item!r}") from None
        if not isinstance(n, str) or not isinstance(t, (Tensor, np.ndarray)):
            raise TypeError(f"expected (str, Tensor) pairs, got ({type(n).__name__}, {type(t).__name__})")
        out.append((n, t))
    return out


def save_checkpoint(path, named_parameters, named_buffers=(), *, structure=None, extra=None,
                    compression=None):
    """Write parameters and buffers (``(name, tensor)`` pairs or dicts) to ``path``
    (crash-safe, see :func:`~numbagrad.io.save`), with their structural hash.
    ``structure``: the ``architecture`` list to include in the hash (modules pass theirs).
    ``extra``: any savable object stored beside them (epoch, metrics, config...)."""
    params = _pairs(named_parameters)
    buffers = _pairs(named_buffers)
    h = structure_hash(params, buffers, structure)
    save({"kind": KIND, "structure_hash": h, "architecture": structure or [],
          "parameters": {n: t.detach() if isinstance(t, Tensor) else t for n, t in params},
          "buffers": {n: t.detach() if isinstance(t, Tensor) else t for n, t in buffers},
          "extra": extra}, path, compression=compression)
    return h


def read_checkpoint(path, map_location="cpu"):
    """The raw content of a module checkpoint (a dict, see the module docstring)."""
    ck = load(path, map_location=map_location)
    if not (isinstance(ck, dict) and ck.get("kind") == KIND and isinstance(ck.get("parameters"), dict)
            and isinstance(ck.get("buffers"), dict) and isinstance(ck.get("structure_hash"), str)):
        raise CheckpointError(str(path), "a numbagrad checkpoint, but not a module checkpoint "
                              "(written by numbagrad.save, not Module.save_checkpoint); read it with numbagrad.load")
    return ck


def load_checkpoint(path, named_parameters, named_buffers=(), expected_hash=None, strict=True):
    """Copy the checkpoint's tensors into ``named_parameters``/``named_buffers`` (pairs or
    dicts of the model's tensors, written in place in their own dtype and device) and
    return a :class:`LoadReport`. ``expected_hash``: the structural hash the file must
    carry (:func:`structure_hash` of the target). ``strict``: raise
    :class:`CheckpointMismatch` (nothing copied) unless every name matches in both
    directions with equal shapes and the hash matches; otherwise copy the matching
    subset (transfer learning)."""
    ck = read_checkpoint(path)
    targets = dict(_pairs(named_parameters))
    targets.update(_pairs(named_buffers))
    stored = dict(ck["parameters"])
    stored.update(ck["buffers"])
    report = LoadReport(file_hash=ck["structure_hash"], expected_hash=expected_hash)
    if expected_hash is not None:
        report.hash_matches = ck["structure_hash"] == expected_hash
    plan = []
    for name, value in stored.items():
        t = targets.get(name)
        if t is None:
            report.skipped.append(name)
        elif tuple(value.shape) != tuple(t.shape):
            report.skipped.append(name)
            report.mismatched.append((name, tuple(value.shape), tuple(t.shape)))
        else:
            plan.append((name, t, value))
    report.missing = [n for n in targets if n not in stored]
    if strict and not report.complete:
        raise CheckpointMismatch(f"load_checkpoint({str(path)!r}, strict=True): the checkpoint does not match "
                                 f"the model; nothing was loaded.\n{report}", report)
    with no_grad():
        for name, t, value in plan:
            src = value.array if isinstance(value, Tensor) else np.asarray(value)
            if isinstance(t, Tensor):
                t.copy_(Tensor._from_array(src))
            else:
                np.copyto(t, src, casting="unsafe")
            report.loaded.append(name)
    return report


def _module_save_checkpoint(self, path, extra=None, compression=None):
    """Write this module's parameters and persistent buffers, with the structural hash
    of its architecture (:mod:`numbagrad.io.checkpoint`), crash-safely to ``path``.
    Returns the hash."""
    return save_checkpoint(path, self.named_parameters(), _persistent_buffers(self), structure=architecture(self),
                           extra=extra, compression=compression)


def _module_load_checkpoint(self, path, strict=True):
    """Load a checkpoint :meth:`save_checkpoint` wrote into this module; see
    :func:`numbagrad.io.load_checkpoint` for ``strict`` and the returned report."""
    return load_checkpoint(path, self.named_parameters(), _persistent_buffers(self),
                           expected_hash=module_structure_hash(self), strict=strict)


# attached here so that nn never imports io (the layering rule: io sits above nn)
Module.save_checkpoint = _module_save_checkpoint
Module.load_checkpoint = _module_load_checkpoint

__all__ = ["save_checkpoint", "load_checkpoint", "read_checkpoint", "structure_hash", "module_structure_hash",
           "architecture", "LoadReport", "CheckpointMismatch"]
