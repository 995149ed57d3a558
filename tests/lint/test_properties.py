"""Properties of the rules over arbitrary images: no exceptions, exact SK001/SK002 sets."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from shimkit.checks import NameSetReference, Severity, lint_image, lint_set
from shimkit.checks.known_shims import known_shim_names
from shimkit.checks.model import LintContext
from shimkit.config import ShimConfig, load_config
from shimkit.elf import ElfImage, Symbol
from shimkit.exitcodes import EXIT_OTHER_VIOLATION, EXIT_UNPREFIXED

CONFIG: ShimConfig = load_config()
KNOWN = known_shim_names() or frozenset()
_IDENT_START = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def wrong_prefix(name: str) -> bool:
    """SK001/SK002's definition, spelled out: unprefixed, or a known shim name after some
    other prefix that could be a C identifier's start (not a mangled C++ name)."""
    if CONFIG.is_family(name):
        return True
    if CONFIG.is_prefixed_family(name):
        return False
    return any(
        name[i:] in KNOWN and _IDENT_START.fullmatch(name[:i]) and not name.startswith("_Z")
        for i in range(1, len(name))
    )


_pieces = st.sampled_from(
    [
        "aoti_torch_",
        "torch_",
        CONFIG.prefix,
        "_ZN3c10",
        "_ZN2at",
        "_ZNSt",
        "AOTInductorModelContainer",
        "Run",
        "get_dim",
        "x",
        "",
    ]
)
names = st.lists(_pieces, min_size=1, max_size=4).map("".join) | st.text(max_size=20)
symbols = st.builds(
    Symbol,
    name=names,
    version=st.none() | st.just("GLIBC_2.2.5"),
    binding=st.sampled_from(["GLOBAL", "WEAK", "GNU_UNIQUE"]),
    type=st.sampled_from(["FUNC", "OBJECT", "NOTYPE"]),
    defined=st.booleans(),
)
images = st.builds(
    ElfImage,
    location=st.sampled_from(["lib/libx.so", "out/m.wrapper.so", "m.pt2!m/data/aotinductor/y.so"]),
    elf_class=st.sampled_from([32, 64]),
    little_endian=st.booleans(),
    e_type=st.sampled_from(["DYN", "EXEC", "REL"]),
    machine=st.just("EM_X86_64"),
    imports=st.lists(symbols, max_size=12),
    exports=st.lists(symbols, max_size=12),
    needed=st.lists(
        st.sampled_from(["libc.so.6", "libtorch_cpu.so", "libc10.so", "x"]), max_size=3
    ),
    soname=st.none(),
    exec_stack=st.none() | st.booleans(),
    size=st.integers(0, 10**9),
)


@settings(max_examples=300, deadline=None)
@given(image=images, blob=st.booleans(), providers=st.none() | st.frozensets(names, max_size=5))
def test_rules_never_raise_and_sk001_is_exact(
    image: ElfImage, blob: bool, providers: frozenset[str] | None
) -> None:
    reference = NameSetReference({"libtorch_cpu.so": frozenset({"x", "aoti_torch_x"})})
    context = LintContext(config=CONFIG, force_blob=blob, providers=providers, reference=reference)
    findings = lint_image(image, context)
    sk001 = {f.symbol for f in findings if f.rule_id == "SK001"}
    assert sk001 == {s.name for s in image.imports if wrong_prefix(s.name)}
    sk002 = {f.symbol for f in findings if f.rule_id == "SK002"}
    assert sk002 == {s.name for s in image.exports if wrong_prefix(s.name)}
    assert findings == sorted(findings, key=lambda f: f.sort_key())
    assert all(f.location == image.location and f.message for f in findings)
    result = lint_set([image], LintContext(config=CONFIG, force_blob=blob))
    code = result.exit_code()
    rules = {f.rule_id for f in result.findings if f.severity is Severity.ERROR}
    assert bool(code & EXIT_UNPREFIXED) == bool(rules & {"SK001", "SK002"})
    assert bool(code & EXIT_OTHER_VIOLATION) == bool(rules - {"SK001", "SK002", "SK003"})
    assert code & ~(EXIT_UNPREFIXED | EXIT_OTHER_VIOLATION) == 0  # no reference, no inputs errors
