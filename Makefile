# shimkit: two commands set up and prove everything on a fresh Debian 12 machine.
#   make demo   install what is missing, then run the main job on the bundled example
#   make test   ruff + pytest + bazel test //... + buildifier, ending in "N passed, N failed"
#   make dist   the release archive Bazel consumers download (build/dist/)
SHELL := /bin/bash
PY := .venv/bin/python

.PHONY: setup demo test dist wheel fmt clean

setup:
	@tools/bootstrap.sh

demo: setup
	@$(PY) tools/demo.py

test: setup
	@$(PY) tools/run_tests.py

# The release archive (git archive of HEAD) and its sha256/integrity, in build/dist/.
dist:
	@python3 tools/dist.py

# The self-contained manylinux wheel (docs/adopting.md), into build/dist/.
wheel: setup
	@$(PY) tools/build_wheel.py

fmt: setup
	.venv/bin/ruff format lint tests bench tools
	git ls-files -z '*.bzl' '*.bazel' WORKSPACE '*/WORKSPACE' '*.bzlmod' | xargs -0 node_modules/.bin/buildifier -lint=fix

clean:
	bazel clean 2>/dev/null || true
	rm -rf --one-file-system .pytest-report.xml build
