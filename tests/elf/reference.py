"""A slow, obviously-correct reference: symbols through pyelftools' own iteration."""

from __future__ import annotations

from pathlib import Path

from elftools.elf.elffile import ELFFile
from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection, GNUVerSymSection
from elftools.elf.sections import SymbolTableSection

_BIND = {"STB_LOCAL": "LOCAL", "STB_GLOBAL": "GLOBAL", "STB_WEAK": "WEAK", "STB_LOOS": "GNU_UNIQUE"}
_TYPE = {
    "STT_NOTYPE": "NOTYPE",
    "STT_OBJECT": "OBJECT",
    "STT_FUNC": "FUNC",
    "STT_SECTION": "SECTION",
    "STT_FILE": "FILE",
    "STT_COMMON": "COMMON",
    "STT_TLS": "TLS",
    "STT_LOOS": "IFUNC",
}

Row = tuple[str, str | None, str, str, bool]  # name, version, binding, type, defined


def _name(raw: str) -> str:
    # pyelftools decodes names as latin-1; shimkit decodes UTF-8 (surrogateescape).
    return raw.encode("latin-1").decode("utf-8", "surrogateescape")


def reference_structure(path: Path) -> tuple[list[str], str | None, str]:
    """(DT_NEEDED, DT_SONAME, machine) through pyelftools."""
    with path.open("rb") as handle:
        elf = ELFFile(handle)
        machine = elf["e_machine"]
        dynamic = next(iter(elf.iter_sections("SHT_DYNAMIC")), None)
        if dynamic is None:
            return [], None, machine
        needed = [t.needed for t in dynamic.iter_tags("DT_NEEDED")]
        sonames = [t.soname for t in dynamic.iter_tags("DT_SONAME")]
        return needed, (sonames[0] if sonames else None), machine


def reference_symbols(path: Path) -> tuple[str | None, list[Row], list[Row]]:
    """(table name, imports, exports) computed the slow way, sorted like shimkit."""
    with path.open("rb") as handle:
        elf = ELFFile(handle)
        want = "SHT_SYMTAB" if elf["e_type"] == "ET_REL" else "SHT_DYNSYM"
        table = next((s for s in elf.iter_sections() if s["sh_type"] == want), None)
        if table is None:
            return None, [], []
        assert isinstance(table, SymbolTableSection)
        versym = None
        names: dict[int, str] = {}
        if want == "SHT_DYNSYM":
            for section in elf.iter_sections():
                if isinstance(section, GNUVerSymSection):
                    versym = section
                elif isinstance(section, GNUVerNeedSection):
                    for _, auxes in section.iter_versions():
                        for aux in auxes:
                            names[aux["vna_other"] & 0x7FFF] = aux.name
                elif isinstance(section, GNUVerDefSection):
                    for entry, auxes in section.iter_versions():
                        names[entry["vd_ndx"] & 0x7FFF] = next(iter(auxes)).name
        imports: list[Row] = []
        exports: list[Row] = []
        for i, sym in enumerate(table.iter_symbols()):
            if i == 0:
                continue
            version = None
            if versym is not None:
                ndx = versym.get_symbol(i)["ndx"]
                if isinstance(ndx, int) and (ndx & 0x7FFF) > 1:
                    version = names.get(ndx & 0x7FFF)
            info = sym["st_info"]
            bind = _BIND.get(info["bind"], f"BIND_{info['bind']}")
            typ = _TYPE.get(info["type"], f"TYPE_{info['type']}")
            defined = sym["st_shndx"] != "SHN_UNDEF"
            row = (_name(sym.name), version, bind, typ, defined)
            if defined and bind != "LOCAL":
                exports.append(row)
            elif not defined and sym.name:
                imports.append(row)
        key = lambda r: (r[0], r[1] or "")  # noqa: E731
        return table.name, sorted(imports, key=key), sorted(exports, key=key)
