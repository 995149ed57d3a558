"""shimkit: a private, prefixed AOTInductor shim ABI, and the tools that prove it holds."""

__version__ = "0.1.0"
