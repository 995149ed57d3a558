#!/bin/sh
echo "remote_coverage_tools stub: bazel coverage is not supported offline" >&2
exit 1
