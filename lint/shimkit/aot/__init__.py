"""AOTInductor helpers: compile prefixed blobs, rewrite prebuilt ones, forward to libtorch.

Heavy imports (torch, LIEF) happen inside the functions that need them, so
`import shimkit.aot` stays cheap and works without torch installed.
"""
