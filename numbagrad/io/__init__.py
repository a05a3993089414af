"""Checkpoints: ``save``/``load`` of nested state (HDF5, pickle-free, crash-safe), module
checkpoints with a structural check, and safetensors interchange.

This package sits above tensor, nn, optim and data: it imports them, they never import it
(the ``Module.save_checkpoint``/``load_checkpoint`` methods are attached from here)."""
from ._atomic import atomic_path, atomic_write_bytes  # noqa: F401
from .errors import CheckpointError  # noqa: F401
from ._format import save, load, FORMAT, FORMAT_VERSION  # noqa: F401
from .checkpoint import (save_checkpoint, load_checkpoint, read_checkpoint, structure_hash,  # noqa: F401
                         module_structure_hash, LoadReport, CheckpointMismatch)
from .async_save import AsyncSaver, async_save, default_saver  # noqa: F401
from .safetensors_io import save_safetensors, load_safetensors  # noqa: F401  (needs the safetensors extra when called)
