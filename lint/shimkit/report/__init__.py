"""Lint reports: human text, versioned JSON and SARIF 2.1.0."""

from __future__ import annotations

from shimkit.checks import LintResult
from shimkit.config import ShimConfig
from shimkit.report.json_report import SCHEMA as JSON_SCHEMA
from shimkit.report.json_report import render_json
from shimkit.report.sarif import SarifOptions, render_sarif
from shimkit.report.text import render_text

FORMATS = ("text", "json", "sarif")


def render(
    result: LintResult,
    config: ShimConfig,
    fmt: str,
    *,
    color: bool = False,
    quiet: bool = False,
    sarif: SarifOptions | None = None,
) -> str:
    """The report for `result` in format `fmt` (one of FORMATS), ending in a newline."""
    if fmt == "json":
        return render_json(result, config)
    if fmt == "sarif":
        return render_sarif(result, config, sarif)
    return render_text(result, config, color=color, quiet=quiet)


__all__ = [
    "FORMATS",
    "JSON_SCHEMA",
    "SarifOptions",
    "render",
    "render_json",
    "render_sarif",
    "render_text",
]
