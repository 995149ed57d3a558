"""Offline stand-in for @rules_cc//cc:defs.bzl: forwards to the native rules.

Bazel 4.2.3's embedded tools load this file; Debian's rules-cc package is
too new for that Bazel, and the network is not available, so this stub keeps
the workspace self-contained. Only the symbols those tools and this project
use are provided.
"""

def cc_binary(**attrs):
    """Forwards to native.cc_binary.

    Args:
      **attrs: the attributes of native.cc_binary.
    """
    native.cc_binary(**attrs)  # buildifier: disable=native-cc-binary

def cc_import(**attrs):
    """Forwards to native.cc_import.

    Args:
      **attrs: the attributes of native.cc_import.
    """
    native.cc_import(**attrs)  # buildifier: disable=native-cc-import

def cc_library(**attrs):
    """Forwards to native.cc_library.

    Args:
      **attrs: the attributes of native.cc_library.
    """
    native.cc_library(**attrs)  # buildifier: disable=native-cc-library

def cc_test(**attrs):
    """Forwards to native.cc_test.

    Args:
      **attrs: the attributes of native.cc_test.
    """
    native.cc_test(**attrs)  # buildifier: disable=native-cc-test

def cc_toolchain(**attrs):
    """Forwards to native.cc_toolchain.

    Args:
      **attrs: the attributes of native.cc_toolchain.
    """
    native.cc_toolchain(**attrs)  # buildifier: disable=native-cc-toolchain

def cc_toolchain_suite(**attrs):
    """Forwards to native.cc_toolchain_suite.

    Args:
      **attrs: the attributes of native.cc_toolchain_suite.
    """
    native.cc_toolchain_suite(**attrs)  # buildifier: disable=native-cc-toolchain-suite
