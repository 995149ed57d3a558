"""iter_images over files, directories, archives, zips and carved blobs; hostile inputs."""

from __future__ import annotations

import builtins
import io
import os
import shutil
import zipfile
from pathlib import Path

import pytest
from shimkit.elf import ElfImage, InputError
from shimkit.inputs import Limits, iter_images, iter_names

from tests.fixtures.build import PT2_BLOB_MEMBER, PTE_BLOB_OFFSET


def split(results: list) -> tuple[dict[str, ElfImage], dict[str, str]]:
    images = {r.location: r for r in results if not isinstance(r, InputError)}
    errors = {r.location: r.message for r in results if isinstance(r, InputError)}
    assert len(images) + len(errors) == len(results)
    return images, errors


def test_directory_walk_finds_every_kind(elf_fixtures: dict[str, Path]) -> None:
    root = elf_fixtures["blob_prefixed.so"].parent
    seen: list[tuple[int, int]] = []
    images, errors = split(list(iter_images([root], progress=lambda d, t: seen.append((d, t)))))
    assert errors == {}  # not_elf.bin is skipped silently while walking
    rel = {loc[len(str(root)) + 1 :] for loc in images}
    expected = {n for n in elf_fixtures if not n.endswith((".a", ".pt2", ".pte", ".bin"))}
    expected |= {
        "libblobs.a!blob_unprefixed.o",
        "libblobs.a!blob_prefixed.o",
        "libblobs.a!a_member_name_longer_than_sixteen.o",
        f"model.pt2!{PT2_BLOB_MEMBER}",
        f"model_prefixed.pt2!{PT2_BLOB_MEMBER}",
        f"model.pte!elf@{PTE_BLOB_OFFSET:#x}",
    }
    assert rel == expected
    assert seen[-1][0] == seen[-1][1] == len(seen)
    carved = images[f"{root}/model.pte!elf@{PTE_BLOB_OFFSET:#x}"]
    assert carved.offset == PTE_BLOB_OFFSET
    assert carved.size == elf_fixtures["blob_unprefixed.so"].stat().st_size


def test_walk_order_is_deterministic(elf_fixtures: dict[str, Path]) -> None:
    root = elf_fixtures["blob_prefixed.so"].parent
    first = [r.location for r in iter_names([root])]
    assert first == [r.location for r in iter_names([root])]


def test_explicit_non_elf_and_empty_files_are_errors(tmp_path: Path, elf_fixtures: dict) -> None:
    empty = tmp_path / "empty.so"
    empty.touch()
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    missing = tmp_path / "missing.so"
    good = elf_fixtures["blob_prefixed.so"]
    images, errors = split(list(iter_images([empty, text, missing, good, good])))
    assert errors[str(empty)] == "empty file"
    assert "no ELF image inside" in errors[str(text)]
    assert "no such file" in errors[str(missing)]
    assert list(images) == [str(good)]  # duplicates are reported once
    # Met while walking, the same files are skipped silently.
    empty_dir = tmp_path / "d"
    empty_dir.mkdir()
    shutil.copy(text, empty_dir / "notes.txt")
    (empty_dir / "empty.so").touch()
    assert list(iter_images([empty_dir])) == []


def test_permission_denied_is_reported_and_others_continue(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    locked = tmp_path / "locked.so"
    shutil.copy(elf_fixtures["blob_prefixed.so"], locked)
    real_open = builtins.open

    def guarded(file, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(file) == str(locked):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", guarded)
    images, errors = split(list(iter_images([tmp_path, elf_fixtures["blob_unprefixed.so"]])))
    assert errors == {str(locked): "cannot read: permission denied"}
    assert str(elf_fixtures["blob_unprefixed.so"]) in images


def test_symlink_loops(tmp_path: Path, elf_fixtures: dict[str, Path]) -> None:
    root = tmp_path / "tree"
    (root / "sub").mkdir(parents=True)
    shutil.copy(elf_fixtures["blob_unprefixed.so"], root / "sub" / "blob.so")
    (root / "sub" / "back").symlink_to(root)  # directory cycle
    (root / "self").symlink_to(root / "self")  # ELOOP
    (root / "dangling").symlink_to(root / "nowhere")
    (root / "alias.so").symlink_to(root / "sub" / "blob.so")
    images, errors = split(list(iter_images([root])))
    assert list(images) == [str(root / "alias.so")]  # one file, reported once
    assert errors[str(root / "self")] == "symlink loop"
    assert "dangling" in errors[str(root / "dangling")]
    images, errors = split(list(iter_images([root], follow_symlinks=False)))
    assert list(images) == [str(root / "sub" / "blob.so")]
    assert errors == {}


def test_special_files(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    assert list(iter_images([tmp_path])) == []  # never opened: would block
    errors = [r for r in iter_images([fifo]) if isinstance(r, InputError)]
    assert [e.message for e in errors] == ["not a regular file or directory"]


def _zip(path: Path, members: dict[str, bytes], level: int = zipfile.ZIP_DEFLATED) -> None:
    with zipfile.ZipFile(path, "w", level) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def test_zip_bomb_member_is_named_and_others_are_read(
    tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    blob = elf_fixtures["blob_unprefixed.so"].read_bytes()
    bomb = tmp_path / "bomb.pt2"
    _zip(bomb, {"a/bomb.so": b"\x7fELF" + b"\0" * (64 << 20), "b/real.so": blob})
    images, errors = split(list(iter_images([bomb])))
    assert list(errors) == [f"{bomb}!a/bomb.so"]
    assert "compression ratio" in errors[f"{bomb}!a/bomb.so"]
    assert list(images) == [f"{bomb}!b/real.so"]


def test_zip_total_budget_and_member_count(tmp_path: Path, elf_fixtures: dict[str, Path]) -> None:
    blob = elf_fixtures["blob_unprefixed.so"].read_bytes()
    many = tmp_path / "many.zip"
    _zip(many, {f"m{i}.so": blob for i in range(4)})
    tight = Limits(max_total_bytes=2 * len(blob) + 1)
    images, errors = split(list(iter_images([many], limits=tight)))
    assert len(images) == 2 and len(errors) == 2
    assert all("total uncompressed bytes" in m for m in errors.values())
    images, errors = split(list(iter_images([many], limits=Limits(max_members=3))))
    assert images == {} and "members" in errors[str(many)]


def test_zip_member_larger_than_declared(tmp_path: Path, elf_fixtures: dict[str, Path]) -> None:
    """A central directory that lies about a member's size must not be trusted."""
    blob = elf_fixtures["blob_unprefixed.so"].read_bytes()
    path = tmp_path / "liar.zip"
    _zip(path, {"x.so": blob}, zipfile.ZIP_STORED)
    raw = bytearray(path.read_bytes())
    cd = raw.rfind(b"PK\x01\x02")
    size = len(blob).to_bytes(4, "little")
    half = (len(blob) // 2).to_bytes(4, "little")
    assert raw[cd + 24 : cd + 28] == size
    raw[cd + 24 : cd + 28] = half  # uncompressed size in the central directory
    path.write_bytes(bytes(raw))
    results = list(iter_images([path]))
    assert len(results) == 1 and isinstance(results[0], InputError)


def test_corrupt_containers(tmp_path: Path, elf_fixtures: dict[str, Path]) -> None:
    pt2 = elf_fixtures["model.pt2"].read_bytes()
    archive = elf_fixtures["libblobs.a"].read_bytes()
    cut_zip = tmp_path / "cut.pt2"
    cut_zip.write_bytes(pt2[: len(pt2) // 2])
    cut_ar = tmp_path / "cut.a"
    cut_ar.write_bytes(archive[: len(archive) - 100])
    images, errors = split(list(iter_images([cut_zip, cut_ar])))
    assert "bad zip container" in errors[str(cut_zip)]
    assert "bad ar archive" in errors[str(cut_ar)]
    assert len(images) == 2  # the complete members before the cut are still read
    assert all(loc.startswith(str(cut_ar) + "!") for loc in images)


def test_nesting_depth_limit(tmp_path: Path, elf_fixtures: dict[str, Path]) -> None:
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:
        zf.write(elf_fixtures["model.pt2"], "model.pt2")
    outer = tmp_path / "outer.whl"
    _zip(outer, {"pkg/inner.zip": inner.getvalue()})
    images, _ = split(list(iter_images([outer])))
    assert list(images) == [f"{outer}!pkg/inner.zip!model.pt2!{PT2_BLOB_MEMBER}"]
    images, errors = split(list(iter_images([outer], limits=Limits(max_depth=2))))
    assert images == {}
    assert "nested deeper than 2" in errors[f"{outer}!pkg/inner.zip!model.pt2"]


def test_truncated_embedded_image_is_an_error(
    tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    pte = elf_fixtures["model.pte"].read_bytes()
    blob_len = elf_fixtures["blob_unprefixed.so"].stat().st_size
    cut = tmp_path / "cut.pte"
    cut.write_bytes(pte[: PTE_BLOB_OFFSET + blob_len // 2])
    results = list(iter_images([cut]))
    assert len(results) == 1 and isinstance(results[0], InputError)
    assert results[0].location == f"{cut}!elf@{PTE_BLOB_OFFSET:#x}"
    assert results[0].message.startswith("truncated")


def test_large_file_goes_through_mmap(tmp_path: Path, elf_fixtures: dict[str, Path]) -> None:
    blob = elf_fixtures["blob_prefixed.so"].read_bytes()
    big = tmp_path / "big.pte"
    big.write_bytes(b"\0" * (3 << 20) + blob + b"\0" * 100 + blob)
    images, errors = split(list(iter_images([big])))
    assert errors == {}
    assert list(images) == [
        f"{big}!elf@{3 << 20:#x}",
        f"{big}!elf@{(3 << 20) + len(blob) + 100:#x}",
    ]


def test_walk_reads_only_the_head_of_unrelated_files(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, elf_fixtures: dict[str, Path]
) -> None:
    """A bazel-bin full of non-ELF files costs 8 bytes per file, not the whole file."""
    (tmp_path / "big.txt").write_bytes(b"x" * (3 << 20))
    shutil.copy(elf_fixtures["blob_prefixed.so"], tmp_path / "lib.so")
    sizes: list[int] = []
    real_open = builtins.open

    class Counting:
        def __init__(self, handle) -> None:  # type: ignore[no-untyped-def]
            self.handle = handle

        def __enter__(self):  # type: ignore[no-untyped-def]
            return self

        def __exit__(self, *exc) -> None:  # type: ignore[no-untyped-def]
            self.handle.close()

        def fileno(self) -> int:
            return self.handle.fileno()

        def read(self, n: int = -1) -> bytes:
            data = self.handle.read(n)
            sizes.append(len(data))
            return data

    def counting_open(file, mode="r", *args, **kwargs):  # type: ignore[no-untyped-def]
        handle = real_open(file, mode, *args, **kwargs)
        return Counting(handle) if str(file) == str(tmp_path / "big.txt") else handle

    monkeypatch.setattr(builtins, "open", counting_open)
    images, errors = split(list(iter_images([tmp_path])))
    assert list(images) == [str(tmp_path / "lib.so")] and errors == {}
    assert sizes == [8]


def test_name_prefixes_filter_every_image(elf_fixtures: dict[str, Path], config) -> None:
    root = elf_fixtures["blob_prefixed.so"].parent
    for item in iter_images([root], name_prefixes=config.families):
        assert isinstance(item, ElfImage)
        assert item.name_prefixes == config.families
        assert all(s.name.startswith(config.families) for s in item.imports + item.exports)


def test_ar_member_limit(elf_fixtures: dict[str, Path]) -> None:
    archive = elf_fixtures["libblobs.a"]
    images, errors = split(list(iter_images([archive], limits=Limits(max_members=3))))
    # The symbol index and the long-name table count as members: one object is read.
    assert list(images) == [f"{archive}!blob_unprefixed.o"]
    assert errors == {str(archive): "bad ar archive: more than 3 members"}
