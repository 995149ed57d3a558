"""shimkit: a private, prefixed AOTInductor shim ABI, and the tools that prove it holds."""

__version__ = "0.1.0"

# This version's documentation (SARIF help links; `shimkit lint --help-uri-base` overrides).
DOCS_URL = f"https://github.com/shimkit/shimkit/blob/v{__version__}/docs/"
