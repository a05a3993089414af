"""``torch.nn.modules.module``: numbagrad.nn's classes at PyTorch's path (see :mod:`._mirror`)."""
from ._mirror import mirror

__all__ = mirror(globals(), "register_module_forward_pre_hook register_module_forward_hook "
                            "register_module_full_backward_pre_hook register_module_backward_hook "
                            "register_module_full_backward_hook register_module_buffer_registration_hook "
                            "register_module_module_registration_hook "
                            "register_module_parameter_registration_hook Module",
                            private="module: _IncompatibleKeys _addindent")
