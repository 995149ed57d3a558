"""`shimkit config` and `shimkit.config.load_config`: values, formats and errors.

Expected values are never typed here: they come from evaluating
rules/shim_symbol_prefix.bzl independently (a plain starlark-pyo3 evaluation), and the
"does it read the file" controls use a copy with another prefix.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import starlark as sl
from shimkit.config import ShimConfig, load_config
from shimkit.errors import ShimkitError

ROOT = Path(__file__).resolve().parents[1]
PREFIX_FILE = ROOT / "rules" / "shim_symbol_prefix.bzl"
RunShimkit = Callable[..., subprocess.CompletedProcess[str]]

OTHER_PREFIX = "acme_shim_"


def _bzl_values(path: Path) -> dict[str, object]:
    """The constants of a prefix file, by a second, independent evaluation."""
    module = sl.Module()
    ast = sl.parse(str(path), path.read_text(encoding="utf-8"), sl.Dialect.standard())
    sl.eval(module, ast, sl.Globals.standard())
    names = ("SHIM_SYMBOL_PREFIX", "SHIM_SYMBOL_PREFIX_DEFINE", "SHIM_SYMBOL_FAMILIES")
    names += ("SHIM_PREFIX_DEFINES", "SHIM_PREFIX_FLAGS")
    return {name: module[name] for name in names}


def _with_prefix(tmp_path: Path, prefix_line: str) -> Path:
    """A copy of the prefix file whose SHIM_SYMBOL_PREFIX assignment is `prefix_line`."""
    lines = PREFIX_FILE.read_text(encoding="utf-8").splitlines()
    hits = [i for i, line in enumerate(lines) if line.startswith("SHIM_SYMBOL_PREFIX = ")]
    assert len(hits) == 1
    lines[hits[0]] = prefix_line
    out = tmp_path / "rules" / "shim_symbol_prefix.bzl"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def _assert_one_line_error(proc, path_fragment: str, *needles: str) -> str:
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, f"expected one error line, got:\n{proc.stderr}"
    line = lines[0]
    assert line.startswith("shimkit: error: "), line
    assert "Traceback" not in proc.stderr
    assert path_fragment in line, line
    for needle in needles:
        assert needle in line, (needle, line)
    return line


# -- the API --------------------------------------------------------------------------


def test_api_matches_the_bzl_file(config: ShimConfig) -> None:
    values = _bzl_values(PREFIX_FILE)
    assert config.prefix == values["SHIM_SYMBOL_PREFIX"]
    assert config.define == values["SHIM_SYMBOL_PREFIX_DEFINE"]
    assert list(config.families) == values["SHIM_SYMBOL_FAMILIES"]
    assert list(config.defines) == values["SHIM_PREFIX_DEFINES"]
    assert list(config.flags) == values["SHIM_PREFIX_FLAGS"]
    assert config.source == PREFIX_FILE.resolve()
    # The ready-made lists are derived from the prefix and the define.
    assert config.defines == (f"{config.define}={config.prefix}",)
    assert config.flags == (f"-D{config.define}={config.prefix}",)
    assert "aoti_torch_" in config.families


def test_api_name_helpers(config: ShimConfig) -> None:
    name = "aoti_torch_get_data_ptr"
    assert config.is_family(name) and not config.is_prefixed_family(name)
    renamed = config.prefixed(name)
    assert renamed == config.prefix + name
    assert config.is_prefixed_family(renamed) and not config.is_family(renamed)
    for other in ("malloc", "at_tensor", config.prefix + "malloc"):
        assert not config.is_family(other) and not config.is_prefixed_family(other), other


def test_api_reads_the_given_file(tmp_path: Path) -> None:
    """Negative control: another prefix in a copy gives another config."""
    copy = _with_prefix(tmp_path, f'SHIM_SYMBOL_PREFIX = "{OTHER_PREFIX}"')
    other = load_config(copy)
    assert other.prefix == OTHER_PREFIX
    assert other.flags == (f"-D{other.define}={OTHER_PREFIX}",)
    assert other.source == copy.resolve()


def test_api_env_and_cwd_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    copy = _with_prefix(tmp_path, f'SHIM_SYMBOL_PREFIX = "{OTHER_PREFIX}"')
    nested = tmp_path / "a" / "b"
    nested.mkdir(parents=True)
    monkeypatch.delenv("SHIMKIT_CONFIG", raising=False)
    monkeypatch.chdir(nested)
    assert load_config().source == copy.resolve()  # nearest rules/ above the cwd
    monkeypatch.setenv("SHIMKIT_CONFIG", str(PREFIX_FILE))
    assert load_config().source == PREFIX_FILE.resolve()  # the env var wins over the cwd


# -- the console script ---------------------------------------------------------------


def test_cli_text(run_shimkit: RunShimkit, config: ShimConfig) -> None:
    proc = run_shimkit(["config"])
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""
    fields = dict(line.split(":", 1) for line in proc.stdout.splitlines())
    fields = {k.strip(): v.strip() for k, v in fields.items()}
    assert fields == {
        "source": str(config.source),
        "found by": f"nearest shim_symbol_prefix.bzl walking up from {ROOT}",
        "prefix": config.prefix,
        "define": config.define,
        "families": " ".join(config.families),
        "defines": " ".join(config.defines),
        "flags": " ".join(config.flags),
    }


def test_cli_json(run_shimkit: RunShimkit, config: ShimConfig) -> None:
    proc = run_shimkit(["config", "--format", "json"])
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data.pop("reason") == f"nearest shim_symbol_prefix.bzl walking up from {ROOT}"
    expected = config.as_dict()
    del expected["reason"]
    assert data == expected


def test_cli_follows_config_flag_env_and_cwd(run_shimkit: RunShimkit, tmp_path: Path) -> None:
    copy = _with_prefix(tmp_path, f'SHIM_SYMBOL_PREFIX = "{OTHER_PREFIX}"')
    by_flag = run_shimkit(["--config", str(copy), "config", "--format", "json"])
    by_env = run_shimkit(["config", "--format", "json"], env={"SHIMKIT_CONFIG": str(copy)})
    by_cwd = run_shimkit(["config", "--format", "json"], cwd=tmp_path)
    for proc in (by_flag, by_env, by_cwd):
        assert proc.returncode == 0, proc.stderr
        data = json.loads(proc.stdout)
        assert data["prefix"] == OTHER_PREFIX
        assert data["source"] == str(copy.resolve())
        assert data["flags"] == [f"-D{data['define']}={OTHER_PREFIX}"]


def test_cli_usage_error(run_shimkit: RunShimkit) -> None:
    proc = run_shimkit(["config", "--format", "yaml"])
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr


# -- errors: one line naming the file, exit 1, no traceback ---------------------------

BROKEN = {
    "syntax": ("SHIM_SYMBOL_PREFIX = (\n", ["not valid Starlark"]),
    "runtime": ('SHIM_SYMBOL_PREFIX = 1 + "x"\n', ["not valid Starlark"]),
    "undefined": ("SHIM_SYMBOL_PREFIX = nope\n", ["not valid Starlark", "nope"]),
    "fail": ('fail("prefix file is broken")\n', ["not valid Starlark", "prefix file is broken"]),
    "missing-constant": ('SHIM_SYMBOL_PREFIX = "a_"\n', ["does not define"]),
    "load": ('load(":x.bzl", "Y")\n', ["not valid Starlark"]),
}


def _broken_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "broken.bzl"
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_cli_broken_file(run_shimkit: RunShimkit, tmp_path: Path, case: str) -> None:
    text, needles = BROKEN[case]
    path = _broken_file(tmp_path, text)
    proc = run_shimkit(["--config", str(path), "config"])
    _assert_one_line_error(proc, str(path), *needles)


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_api_broken_file(tmp_path: Path, case: str) -> None:
    text, needles = BROKEN[case]
    path = _broken_file(tmp_path, text)
    with pytest.raises(ShimkitError) as info:
        load_config(path)
    message = str(info.value)
    assert "\n" not in message and str(path) in message
    for needle in needles:
        assert needle in message


def test_missing_constant_names_it(tmp_path: Path) -> None:
    keep = [
        line
        for line in PREFIX_FILE.read_text(encoding="utf-8").splitlines()
        if line.startswith("SHIM_SYMBOL_PREFIX = ")
    ]
    assert len(keep) == 1
    path = _broken_file(tmp_path, keep[0] + "\n")
    with pytest.raises(ShimkitError, match="does not define SHIM_SYMBOL_PREFIX_DEFINE"):
        load_config(path)


@pytest.mark.parametrize("bad", ['"1abc_"', '"exec-torch_"', '""', '"a b_"', '"ünï_"'])
def test_cli_bad_prefix(run_shimkit: RunShimkit, tmp_path: Path, bad: str) -> None:
    copy = _with_prefix(tmp_path, f"SHIM_SYMBOL_PREFIX = {bad}")
    proc = run_shimkit(["--config", str(copy), "config", "--format", "json"])
    _assert_one_line_error(proc, str(copy), "SHIM_SYMBOL_PREFIX", "not a valid C identifier")


@pytest.mark.parametrize("bad", ["3", '["x_"]', "None"])
def test_cli_prefix_not_a_string(run_shimkit: RunShimkit, tmp_path: Path, bad: str) -> None:
    """The file's own derived lists fail first (str + int), or the type check does."""
    copy = _with_prefix(tmp_path, f"SHIM_SYMBOL_PREFIX = {bad}")
    proc = run_shimkit(["--config", str(copy), "config"])
    _assert_one_line_error(proc, str(copy))


@pytest.mark.parametrize("where", ["missing", "directory", "binary"])
def test_cli_unreadable_file(run_shimkit: RunShimkit, tmp_path: Path, where: str) -> None:
    path = {"missing": tmp_path / "nope.bzl", "directory": tmp_path}.get(where)
    if path is None:
        path = tmp_path / "binary.bzl"
        path.write_bytes(b"\x7fELF\xff\xfe\x00")
    proc = run_shimkit(["--config", str(path), "config"])
    _assert_one_line_error(proc, str(path), "not found" if where == "missing" else "cannot read")


def test_cli_no_config_anywhere(run_shimkit: RunShimkit, tmp_path: Path) -> None:
    """Outside a checkout, with no flag and no env var, the editable install's file is used."""
    proc = run_shimkit(["config", "--format", "json"], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["source"] == str(PREFIX_FILE.resolve())


def test_error_control(run_shimkit: RunShimkit, tmp_path: Path) -> None:
    """Negative control for the error tests: an unbroken copy exits 0."""
    copy = tmp_path / "ok.bzl"
    shutil.copy(PREFIX_FILE, copy)
    proc = run_shimkit(["--config", str(copy), "config"])
    assert proc.returncode == 0 and proc.stderr == "", proc.stderr


# -- discovery from the working directory ----------------------------------------------


def _prefix_file(path: Path, prefix: str) -> Path:
    """A valid prefix file at `path` with `prefix` (a copy of shimkit's, one line changed)."""
    text = PREFIX_FILE.read_text(encoding="utf-8")
    lines = [
        f'SHIM_SYMBOL_PREFIX = "{prefix}"' if line.startswith("SHIM_SYMBOL_PREFIX = ") else line
        for line in text.splitlines()
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _locate(cwd: Path, env: dict[str, str] | None = None) -> ShimConfig:
    from shimkit.config import locate_config

    location = locate_config(cwd=cwd, environ=env or {})
    return load_config(location.path)


def test_discovery_pointer_files(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    target = _prefix_file(repo / "build" / "abi" / "shim_symbol_prefix.bzl", "acme_")
    deep = repo / "src" / "x"
    deep.mkdir(parents=True)
    (repo / ".shimkit.toml").write_text('config = "build/abi/shim_symbol_prefix.bzl"\n')
    from shimkit.config import locate_config

    found = locate_config(cwd=deep, environ={})
    assert found.path.resolve() == target.resolve()
    assert found.reason == f"config in {repo / '.shimkit.toml'}"
    # pyproject.toml's [tool.shimkit] does the same; agreeing with .shimkit.toml is fine
    (repo / "pyproject.toml").write_text(
        '[project]\nname = "acme"\n[tool.shimkit]\nconfig = "build/abi/shim_symbol_prefix.bzl"\n'
    )
    assert locate_config(cwd=deep, environ={}).path.resolve() == target.resolve()
    (repo / ".shimkit.toml").unlink()
    found = locate_config(cwd=deep, environ={})
    assert found.reason == f"[tool.shimkit] config in {repo / 'pyproject.toml'}"
    assert load_config(found.path).prefix == "acme_"


def test_discovery_nearest_prefix_file(tmp_path: Path) -> None:
    """No pointer: the nearest shim_symbol_prefix.bzl (or rules/shim_symbol_prefix.bzl);
    a pyproject.toml without [tool.shimkit] is not a pointer."""
    outer = _prefix_file(tmp_path / "rules" / "shim_symbol_prefix.bzl", "outer_")
    inner = _prefix_file(tmp_path / "sub" / "shim_symbol_prefix.bzl", "inner_")
    (tmp_path / "sub" / "pyproject.toml").write_text('[project]\nname = "x"\n')
    (tmp_path / "sub" / "a").mkdir()
    assert _locate(tmp_path / "sub" / "a").source == inner.resolve()
    assert _locate(tmp_path).source == outer.resolve()
    # the environment variable wins over discovery
    env = {"SHIMKIT_CONFIG": str(outer)}
    assert _locate(tmp_path / "sub" / "a", env).source == outer.resolve()


AMBIGUOUS = {
    "two-pointers": (
        {
            ".shimkit.toml": 'config = "a.bzl"\n',
            "pyproject.toml": '[tool.shimkit]\nconfig = "b.bzl"\n',
        },
        ["a.bzl", "b.bzl", ".shimkit.toml", "pyproject.toml"],
    ),
    "root-and-rules": (
        {"shim_symbol_prefix.bzl": None, "rules/shim_symbol_prefix.bzl": None},
        ["rules/shim_symbol_prefix.bzl", "/shim_symbol_prefix.bzl"],
    ),
    "nearer-file": (
        {".shimkit.toml": 'config = "a.bzl"\n', "sub/shim_symbol_prefix.bzl": None},
        ["sub/shim_symbol_prefix.bzl", "a.bzl", "nearer"],
    ),
}


@pytest.mark.parametrize("case", sorted(AMBIGUOUS))
def test_discovery_two_candidates_is_one_error(
    run_shimkit: RunShimkit, tmp_path: Path, case: str
) -> None:
    files, needles = AMBIGUOUS[case]
    for name, text in {"a.bzl": None, "b.bzl": None, **files}.items():
        if text is None:
            _prefix_file(tmp_path / name, "p_" + name.replace("/", "_").replace(".", "_") + "_")
        else:
            (tmp_path / name).write_text(text)
    cwd = tmp_path / "sub" if (tmp_path / "sub").is_dir() else tmp_path
    proc = run_shimkit(["config"], cwd=cwd)
    line = _assert_one_line_error(proc, "two different prefix files", "--config", *needles)
    assert str(tmp_path) in line


def test_discovery_agreeing_candidates_are_fine(tmp_path: Path) -> None:
    """Negative control of the ambiguity error: candidates naming one file."""
    target = _prefix_file(tmp_path / "shim_symbol_prefix.bzl", "same_")
    (tmp_path / ".shimkit.toml").write_text('config = "shim_symbol_prefix.bzl"\n')
    (tmp_path / "pyproject.toml").write_text(
        '[tool.shimkit]\nconfig = "./shim_symbol_prefix.bzl"\n'
    )
    (tmp_path / "rules").mkdir()
    (tmp_path / "rules" / "shim_symbol_prefix.bzl").symlink_to(target)
    assert _locate(tmp_path).prefix == "same_"


@pytest.mark.parametrize(
    ("name", "text", "needles"),
    [
        (
            ".shimkit.toml",
            'config = "missing.bzl"\n',
            ["missing.bzl", "not found", ".shimkit.toml"],
        ),
        (".shimkit.toml", "config = 3\n", [".shimkit.toml", "config ="]),
        (".shimkit.toml", "config = [\n", [".shimkit.toml", "not valid TOML"]),
        ("pyproject.toml", "[tool]\nshimkit = 1\n", ["pyproject.toml", "[tool.shimkit]"]),
    ],
)
def test_discovery_bad_pointer(
    run_shimkit: RunShimkit, tmp_path: Path, name: str, text: str, needles: list[str]
) -> None:
    (tmp_path / name).write_text(text)
    proc = run_shimkit(["config"], cwd=tmp_path)
    _assert_one_line_error(proc, str(tmp_path), *needles)


def test_config_flag_after_the_subcommand(run_shimkit: RunShimkit, tmp_path: Path) -> None:
    one = _prefix_file(tmp_path / "one.bzl", "one_")
    two = _prefix_file(tmp_path / "two.bzl", "two_")
    after = run_shimkit(["config", "--config", str(one), "--format", "json"])
    assert after.returncode == 0, after.stderr
    assert json.loads(after.stdout)["prefix"] == "one_"
    same = run_shimkit(["--config", str(one), "config", "--config", str(one)])
    assert same.returncode == 0, same.stderr
    clash = run_shimkit(["--config", str(one), "config", "--config", str(two)])
    _assert_one_line_error(clash, str(two), "--config given twice", str(one))


def test_inconsistent_derived_lists(tmp_path: Path) -> None:
    path = tmp_path / "x.bzl"
    text = PREFIX_FILE.read_text(encoding="utf-8")
    marker = "SHIM_PREFIX_FLAGS = "
    start = text.index(marker)
    path.write_text(text[:start] + 'SHIM_PREFIX_FLAGS = ["-DAOTI_SHIM_SYMBOL_PREFIX=typo_"]\n')
    with pytest.raises(ShimkitError, match=r"SHIM_PREFIX_FLAGS is .*typo_.* derive it"):
        load_config(path)


# -- --format cmake, --output, --check ---------------------------------------------------


def test_cmake_format(run_shimkit: RunShimkit, config: ShimConfig, tmp_path: Path) -> None:
    proc = run_shimkit(["--config", str(PREFIX_FILE), "config", "--format", "cmake"])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("# generated by `shimkit config --format cmake`")
    values = dict(
        line[len("set(") : -1].split(" ", 1) for line in lines[1:] if line.startswith("set(")
    )
    assert values == {
        "SHIMKIT_PREFIX_SOURCE": f'"{config.source}"',
        "SHIMKIT_SHIM_SYMBOL_PREFIX": f'"{config.prefix}"',
        "SHIMKIT_SHIM_SYMBOL_PREFIX_DEFINE": f'"{config.define}"',
        "SHIMKIT_SHIM_SYMBOL_FAMILIES": '"' + ";".join(config.families) + '"',
        "SHIMKIT_SHIM_PREFIX_DEFINES": '"' + ";".join(config.defines) + '"',
        "SHIMKIT_SHIM_PREFIX_FLAGS": '"' + ";".join(config.flags) + '"',
    }


def test_cmake_output_and_check(run_shimkit: RunShimkit, tmp_path: Path) -> None:
    prefix_file = _prefix_file(tmp_path / "repo" / "shim_symbol_prefix.bzl", "gen_")
    out = tmp_path / "repo" / "cmake" / "prefix.cmake"
    out.parent.mkdir()
    args = ["--config", str(prefix_file), "config", "--format", "cmake"]
    assert run_shimkit([*args, "--output", str(out)]).returncode == 0
    text = out.read_text()
    # relocatable: the source is relative to the generated file
    assert (
        'set(SHIMKIT_PREFIX_SOURCE "${CMAKE_CURRENT_LIST_DIR}/../shim_symbol_prefix.bzl")' in text
    )
    assert run_shimkit([*args, "--check", str(out)]).returncode == 0
    # negative control: the prefix file changes, the generated copy does not
    _prefix_file(prefix_file, "gen2_")
    stale = run_shimkit([*args, "--check", str(out)])
    assert stale.returncode == 4, stale.stderr
    assert "out of date" in stale.stderr and str(out) in stale.stderr
