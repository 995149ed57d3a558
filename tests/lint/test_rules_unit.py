"""Each rule over hand-built ElfImage objects: a failing case and its negative control."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from shimkit.checks import (
    RULES,
    RULES_BY_ID,
    LintContext,
    NameSetReference,
    Role,
    lint_image,
    lint_set,
    resolve_rule,
    role_of,
)
from shimkit.checks.rules import collision_candidate, torch_cxx_symbol
from shimkit.config import ShimConfig
from shimkit.elf import ElfImage, InputError, Symbol
from shimkit.exitcodes import (
    EXIT_COLLISION,
    EXIT_ERROR,
    EXIT_OTHER_VIOLATION,
    EXIT_UNPREFIXED,
)

ENTRY = [
    "AOTInductorModelContainerCreateWithDevice",
    "AOTInductorModelContainerDelete",
    "AOTInductorModelContainerRun",
]


def imp(name: str, binding: str = "GLOBAL") -> Symbol:
    return Symbol(name=name, version=None, binding=binding, type="FUNC", defined=False)


def exp(name: str, binding: str = "GLOBAL") -> Symbol:
    return Symbol(name=name, version=None, binding=binding, type="FUNC", defined=True)


def image(
    location: str = "lib/libx.so",
    imports: list[str] | None = None,
    exports: list[str] | None = None,
    needed: list[str] | None = None,
    exec_stack: bool | None = False,
    e_type: str = "DYN",
    weak_imports: list[str] | None = None,
) -> ElfImage:
    syms = [imp(n) for n in imports or []] + [imp(n, "WEAK") for n in weak_imports or []]
    exports_ = [exp(n) for n in exports or []]
    return ElfImage(
        location=location,
        elf_class=64,
        little_endian=True,
        e_type=e_type,
        machine="EM_X86_64",
        imports=syms,
        exports=exports_,
        needed=needed or [],
        soname=None,
        exec_stack=exec_stack,
        size=1000,
        symbol_table=".dynsym",
        symbol_count=len(syms) + len(exports_),
    )


def blob(**kwargs: object) -> ElfImage:
    exports = list(kwargs.pop("exports", ENTRY))  # type: ignore[call-overload]
    return image(
        location="m.pt2!m/data/aotinductor/model/abc.wrapper.so", exports=exports, **kwargs
    )  # type: ignore[arg-type]


def ids(img: ElfImage, ctx: LintContext) -> list[str]:
    return sorted({f.rule_id for f in lint_image(img, ctx)})


@pytest.fixture
def ctx(config: ShimConfig) -> LintContext:
    return LintContext(config=config)


def test_table_ids_are_stable_unique_and_documented(repo_root: Path) -> None:
    ids_ = [r.id for r in RULES]
    assert ids_ == sorted(ids_) and len(set(ids_)) == len(ids_)
    assert all(re.fullmatch(r"SK\d{3}", i) for i in ids_)
    names = [r.name for r in RULES]
    assert len(set(names)) == len(names)
    assert all(re.fullmatch(r"[a-z]+(-[a-z0-9]+)*", n) for n in names)
    catalogue = (repo_root / "docs" / "lint-rules.md").read_text(encoding="utf-8")
    for rule in RULES:
        assert f"## {rule.id} {rule.name}" in catalogue, rule.id
        assert rule.summary and rule.fix
    assert resolve_rule("sk001") is RULES_BY_ID["SK001"]
    assert resolve_rule("executable-stack") is RULES_BY_ID["SK007"]
    assert resolve_rule("SK999") is None


def test_sk001_unprefixed_import(ctx: LintContext, config: ShimConfig) -> None:
    assert ids(image(imports=["aoti_torch_get_dim"]), ctx) == ["SK001"]
    assert ids(image(weak_imports=["aoti_torch_get_dim"]), ctx) == ["SK001"]
    assert ids(image(imports=["torch_call_dispatcher"]), ctx) == ["SK001"]
    # controls: prefixed, or not a shim family
    assert ids(image(imports=[config.prefixed("aoti_torch_get_dim")]), ctx) == []
    assert ids(image(imports=["malloc", "my_aoti_torch_x"]), ctx) == []


def test_sk002_unprefixed_export_only_in_own_and_blob(config: ShimConfig) -> None:
    own = LintContext(config=config)
    assert ids(image(exports=["aoti_torch_get_dim"]), own) == ["SK002"]
    assert ids(image(exports=[config.prefixed("aoti_torch_get_dim")]), own) == []
    other = LintContext(config=config, own_patterns=("libmine*",))
    assert ids(image(exports=["aoti_torch_get_dim"]), other) == []
    mine = image(location="out/libmine.so", exports=["aoti_torch_get_dim"])
    assert ids(mine, other) == ["SK002"]


def test_sk003_collision_with_reference(config: ShimConfig) -> None:
    ref = NameSetReference(
        {"libtorch_cpu.so": frozenset({"at_thing", "_ZNSt6vectorIiE9push_backEv"})}
    )
    ctx = LintContext(config=config, reference=ref)
    findings = lint_image(image(exports=["at_thing", "mine"]), ctx)
    assert [(f.rule_id, f.symbol) for f in findings] == [("SK003", "at_thing")]
    assert "libtorch_cpu.so" in findings[0].message
    # controls: std:: vague linkage is not a collision; no reference, no check
    assert ids(image(exports=["_ZNSt6vectorIiE9push_backEv"]), ctx) == []
    assert ids(image(exports=["at_thing"]), LintContext(config=config)) == []


def test_sk004_needs_a_provider(config: ShimConfig) -> None:
    name = config.prefixed("aoti_torch_get_sizes")
    ctx = LintContext(config=config, providers=frozenset({config.prefixed("aoti_torch_get_dim")}))
    assert ids(image(imports=[name]), ctx) == ["SK004"]
    ok = LintContext(config=config, providers=frozenset({name}))
    assert ids(image(imports=[name]), ok) == []
    assert ids(image(weak_imports=[name]), ctx) == []  # weak may stay unresolved
    assert ids(image(imports=[name]), LintContext(config=config)) == []  # no providers known


def test_sk004_closure_over_the_linted_set(config: ShimConfig) -> None:
    name = config.prefixed("aoti_torch_get_dim")
    user = image(location="libuser.so", imports=[name])
    provider = image(location="libshim.so", exports=[name])
    together = lint_set([user, provider], LintContext(config=config))
    assert together.findings == []
    missing = image(location="libuser2.so", imports=[config.prefixed("aoti_torch_clone")])
    result = lint_set([missing, provider], LintContext(config=config))
    assert [f.rule_id for f in result.findings] == ["SK004"]
    alone = lint_set([user], LintContext(config=config))
    assert alone.findings == [] and any("SK004 skipped" in n for n in alone.notes)


def test_sk005_needs_libtorch(ctx: LintContext) -> None:
    for lib in ("libtorch_cpu.so", "libtorch.so", "libc10.so", "libc10_cuda.so.2"):
        assert ids(blob(needed=[lib, "libc.so.6"]), ctx) == ["SK005"], lib
    assert ids(blob(needed=["libc.so.6", "libstdc++.so.6", "libgomp.so.1"]), ctx) == []
    # own libraries may link libtorch: the rule is for blobs only
    assert ids(image(needed=["libtorch_cpu.so"]), ctx) == []


@pytest.mark.parametrize(
    ("name", "torch"),
    [
        ("_ZN3c109warn_onceEv", True),
        ("_ZNK3c1010TensorImpl5sizesEv", True),
        ("_ZN2at6detail10empty_cpuEv", True),
        ("_ZN5torch3jit4loadEv", True),
        ("_ZTVN3c1011StorageImplE", True),
        ("_ZTIN2at6TensorE", True),
        ("_ZNK6caffe28TypeMeta4nameEv", True),
        ("_ZN6caffe2x3fooEv", False),
        ("_ZN5mylib3fooEv", False),
        ("_ZN3c1x3fooEv", False),
        ("_ZN2atlas3fooEv", False),
        ("_ZNSt6vectorIN2at6TensorEE9push_backEv", False),
        ("aoti_torch_get_dim", False),
        ("c10_thing", False),
    ],
)
def test_torch_cxx_names(name: str, torch: bool) -> None:
    assert torch_cxx_symbol(name) is torch


def test_sk006_blob_imports_torch_cxx(ctx: LintContext) -> None:
    assert ids(blob(imports=["_ZN3c109warn_onceEv"]), ctx) == ["SK006"]
    assert ids(blob(imports=["_ZN5mylib9warn_onceEv", "_ZSt4cerr"]), ctx) == []


def test_sk007_exec_stack(ctx: LintContext) -> None:
    assert ids(image(exec_stack=True), ctx) == ["SK007"]
    assert ids(image(exec_stack=False), ctx) == []
    assert ids(image(exec_stack=None), ctx) == []


def test_sk008_entry_points(ctx: LintContext) -> None:
    findings = lint_image(blob(exports=ENTRY[:2]), ctx)
    assert [(f.rule_id, f.symbol) for f in findings] == [("SK008", "AOTInductorModelContainerRun")]
    old_create = ["AOTInductorModelContainerCreate", *ENTRY[1:]]
    assert ids(blob(exports=old_create), ctx) == []
    assert ids(blob(exports=ENTRY, e_type="REL"), ctx) == []


def test_sk009_proxy_executor(ctx: LintContext, config: ShimConfig) -> None:
    name = config.prefixed("aoti_torch_proxy_executor_call_function")
    assert ids(blob(imports=[name]), ctx) == ["SK009"]
    assert ids(blob(imports=["aoti_torch_proxy_executor_call_function"]), ctx) == [
        "SK001",
        "SK009",
    ]
    assert ids(blob(imports=[config.prefixed("aoti_torch_get_dim")]), ctx) == []


def test_sk010_extra_blob_exports_is_a_warning(ctx: LintContext) -> None:
    findings = lint_image(blob(exports=[*ENTRY, "_ZNSt6vectorIiED1Ev", "helper"]), ctx)
    assert [(f.rule_id, f.severity.value) for f in findings] == [("SK010", "warning")]
    assert "2 symbol(s)" in findings[0].message
    assert lint_set([blob(exports=[*ENTRY, "helper"])], ctx).exit_code() == 0
    assert ids(blob(exports=[*ENTRY, "_init", "_fini"]), ctx) == []
    assert ids(image(exports=["helper"]), ctx) == []  # own libraries may export anything


@pytest.mark.parametrize(
    ("location", "exports", "expected"),
    [
        ("out/x.wrapper.so", [], Role.BLOB),
        ("m.pt2!m/data/aotinductor/model/x.so", [], Role.BLOB),
        ("lib/libplain.so", ["AOTInductorModelContainerRun"], Role.BLOB),
        ("lib/libplain.so", ["f"], Role.OWN),
        ("m.pte!elf@0x1a000", [], Role.OWN),
    ],
)
def test_roles(config: ShimConfig, location: str, exports: list[str], expected: Role) -> None:
    assert (
        role_of(image(location=location, exports=exports), LintContext(config=config)) is expected
    )


def test_forced_blob_role(config: ShimConfig) -> None:
    ctx = LintContext(config=config, force_blob=True)
    assert role_of(image(location="lib/libplain.so"), ctx) is Role.BLOB


def test_collision_candidates() -> None:
    for name in (
        "_init",
        "_fini",
        "_ZSt4cerr",
        "_ZNKSt6locale2id5_M_idEv",
        "_ZTVN9__gnu_cxx3fooE",
        "_ZGVZNKSt8__detail3fooEvE1x",
        "_ZZNSt19_Sp_make_shared_tag5_S_tiEvE5__tag",
    ):
        assert not collision_candidate(name), name
    for name in ("aoti_torch_get_dim", "_ZN3c109warn_onceEv", "my_function"):
        assert collision_candidate(name), name


def test_exit_code_bits(config: ShimConfig) -> None:
    ref = NameSetReference({"libtorch_cpu.so": frozenset({"clash"})})
    result = lint_set(
        [
            image(location="a.so", imports=["aoti_torch_x"]),
            image(location="b.so", exports=["clash"]),
            image(location="c.so", exec_stack=True),
            InputError("d.so", "not an ELF file"),
        ],
        LintContext(config=config, reference=ref),
    )
    assert (
        result.exit_code() == EXIT_UNPREFIXED | EXIT_COLLISION | EXIT_OTHER_VIOLATION | EXIT_ERROR
    )
    assert [a.location for a in result.artifacts] == ["a.so", "b.so", "c.so"]
    clean = lint_set([image(location="e.so", exports=["f"])], LintContext(config=config))
    assert clean.exit_code() == 0
