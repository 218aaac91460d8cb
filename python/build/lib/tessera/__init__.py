"""tessera: GPU sharing for multi-tenant nodes. This package holds the
Python side of libtessera-rt: `tessera.rt`, its plain API over ctypes (no
PyTorch needed)."""

__version__ = "0.1.0"
