"""``torch.backends.cpu``: the CPU's vector instruction level."""
import platform


def _x86_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def get_cpu_capability():
    """PyTorch's name for the widest vector extension this CPU offers: ``"AVX512"`` (with
    AVX512F/BW/VL/DQ and FMA, as PyTorch requires), ``"AVX2"`` (with FMA) or ``"DEFAULT"``,
    read from ``/proc/cpuinfo`` (``"DEFAULT"`` where that cannot be read or on other
    architectures). Unlike PyTorch, numbagrad does not read ``ATEN_CPU_CAPABILITY``: numba
    compiles its kernels for the host CPU (``NUMBA_CPU_NAME`` changes that)."""
    if platform.machine().lower() not in ("x86_64", "amd64", "i386", "i686"):
        return "DEFAULT"
    flags = _x86_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "fma"} <= flags:
        return "AVX512"
    if {"avx2", "fma"} <= flags:
        return "AVX2"
    return "DEFAULT"


__all__ = ["get_cpu_capability"]
