"""The documented exit-code bitmask (docs/cli.md). Bits combine: 8|16 = 24."""

EXIT_OK = 0
EXIT_ERROR = 1  # input or tool error: unreadable file, bad config, missing tool
EXIT_USAGE = 2  # bad command line
EXIT_BASELINE_DRIFT = 4  # gate: symbols or violations changed since the baseline
EXIT_UNPREFIXED = 8  # an unprefixed shim-family import or export
EXIT_COLLISION = 16  # an export collides with a reference library (libtorch)
EXIT_EXPIRED_SUPPRESSION = 32  # a suppression is past its expiry date
EXIT_OTHER_VIOLATION = 64  # any other error-severity lint finding
