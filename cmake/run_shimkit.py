"""Run shimkit's command line from this source tree, before shimkit is installed.

CMakeLists.txt reads rules/shim_symbol_prefix.bzl with it (`shimkit config --format
cmake`, as every consumer does) while the wheel is being built. The sources go first on
sys.path here rather than through PYTHONPATH, which build frontends manage themselves.
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lint"))

from shimkit.cli import main

raise SystemExit(main())
