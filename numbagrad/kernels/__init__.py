"""Pure array kernels: preallocated outputs in, nothing allocated, no numbagrad objects.

``kernels/cpu/<family>.py`` holds the @njit kernels of an op family; the CUDA twins
live in ``kernels/cuda/<family>.py`` under the same names. Scalar math used by both
targets is written once in ``kernels/scalar.py``; every jit flavour (``njit``,
``cuda.jit`` wrappers) comes from ``kernels/_jit.py`` (CPU) or ``kernels/cuda/_launch.py``.

Entry points (the convention ``be.kernel`` relies on):

* Every family module declares ``ENTRY_POINTS = ("softmax_fwd", "softmax_bwd", ...)``, a
  tuple of literal strings right after the imports: the names ``be.kernel(family, name)``
  resolves. ``kernels/cpu/<family>.py`` defines ``_<name>_cpu`` for each of them;
  ``kernels/cuda/<family>.py`` defines the launcher ``_<name>_cuda``, taking the same
  parameters (same names, same order), for each of its own ``ENTRY_POINTS``. A CPU entry
  point without a CUDA twin is listed in ``tests/test_kernel_twins.py``'s ``CPU_ONLY``
  with the reason.
* ``be.kernel`` refuses any other name: module-private passes (called only by an entry
  point of the same module) have no ``_cpu``/``_cuda`` suffix (``_softmax_bwd_rows``).
* Ops name kernels with literal strings (``be.kernel("softmax", "softmax_bwd")`` or a
  ``fwd_kernel = "softmax_fwd"`` class attribute), never strings built at run time, so
  ``grep -rn softmax_bwd numbagrad`` finds the Function, both kernels and the tests.
"""
