"""Find the C-linkage `AOTI_TORCH_EXPORT` declarations in torch's C shim headers.

The parser is deliberately small and does not preprocess: comments and
preprocessor directives are removed, `extern "C" { ... }` regions are found by
brace matching, and every `AOTI_TORCH_EXPORT` declaration inside a region
contributes the identifier that names it. Declarations under any `#if` branch
count (a rename list must cover every configuration torch can be built in).
Declarations outside an extern "C" region (C++ names, e.g. in
`shim_exception_state.h`) are mangled and are not part of the C ABI.
"""

from __future__ import annotations

import re
from pathlib import Path

from shimkit.errors import ShimkitError

EXPORT_MACRO = "AOTI_TORCH_EXPORT"

# Header globs under the wheel's include dir that declare the C shim ABI.
SHIM_HEADER_GLOBS = (
    "torch/csrc/inductor/aoti_torch/c/shim*.h",
    "torch/csrc/inductor/aoti_torch/generated/c_shim_*.h",
    "torch/csrc/stable/c/shim.h",
)

_COMMENT = re.compile(r"//[^\n]*|/\*.*?\*/", re.DOTALL)
_STRING = re.compile(r'"(?:\\.|[^"\\\n])*"')
_EXTERN_C = re.compile(r'\bextern\s+"C"\s*\{')
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DECL = re.compile(r"\b" + EXPORT_MACRO + r"\b([^;{}]*)")


def strip_comments_and_directives(text: str) -> str:
    """Remove comments and preprocessor lines (with continuations), keep strings."""

    def keep_strings(match: re.Match[str]) -> str:
        token = match.group(0)
        return token if token.startswith('"') else " "

    text = re.sub(r"//[^\n]*|/\*.*?\*/|" + _STRING.pattern, keep_strings, text, flags=re.DOTALL)
    text = text.replace("\\\n", " ")
    return "\n".join("" if line.lstrip().startswith("#") else line for line in text.split("\n"))


def extern_c_regions(code: str) -> list[str]:
    """The bodies of every top-level `extern "C" { ... }` block in `code`."""
    regions: list[str] = []
    pos = 0
    while True:
        match = _EXTERN_C.search(code, pos)
        if match is None:
            return regions
        depth = 1
        index = match.end()
        while index < len(code) and depth:
            char = code[index]
            if char == "{":
                depth += 1
            elif char == "}":
                depth -= 1
            index += 1
        regions.append(code[match.end() : index - 1])
        pos = index


def declared_name(declaration: str) -> str | None:
    """The identifier a declaration (text after the export macro) declares."""
    head = declaration.split("(", 1)[0] if "(" in declaration else declaration
    head = head.split("=", 1)[0].split("[", 1)[0]
    idents = _IDENT.findall(head)
    return idents[-1] if idents else None


def names_in_text(text: str) -> list[str]:
    """C-linkage exported names declared in one header's text, in order."""
    code = strip_comments_and_directives(text)
    names: list[str] = []
    for region in extern_c_regions(code):
        for match in _DECL.finditer(region):
            name = declared_name(match.group(1))
            if name is not None:
                names.append(name)
    return names


def shim_headers(include_dir: Path) -> list[Path]:
    """The C shim headers under a torch include dir, sorted for determinism."""
    found: set[Path] = set()
    for pattern in SHIM_HEADER_GLOBS:
        found.update(p for p in include_dir.glob(pattern) if p.is_file())
    return sorted(found)


def shim_names(include_dir: str | Path) -> list[str]:
    """Every C-linkage `AOTI_TORCH_EXPORT` name under `include_dir`, sorted and unique."""
    include = Path(include_dir)
    headers = shim_headers(include)
    if not headers:
        raise ShimkitError(
            f"{include}: no C shim headers found (expected {SHIM_HEADER_GLOBS[0]}); "
            "is this a torch include directory?"
        )
    names: set[str] = set()
    for header in headers:
        try:
            text = header.read_text(encoding="utf-8", errors="replace")
        except OSError as exc:
            raise ShimkitError(f"{header}: cannot read: {exc.strerror}") from None
        names.update(names_in_text(text))
    if not names:
        raise ShimkitError(f"{include}: C shim headers declare no {EXPORT_MACRO} names")
    return sorted(names)
