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

PREFIX_FILE = Path(__file__).resolve().parents[1] / "rules" / "shim_symbol_prefix.bzl"
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
        "prefix": config.prefix,
        "define": config.define,
        "families": " ".join(config.families),
        "defines": " ".join(config.defines),
        "flags": " ".join(config.flags),
    }


def test_cli_json(run_shimkit: RunShimkit, config: ShimConfig) -> None:
    proc = run_shimkit(["config", "--format", "json"])
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == config.as_dict()


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
    _assert_one_line_error(proc, str(path), "cannot read")


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
