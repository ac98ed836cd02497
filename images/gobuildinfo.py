"""The build information a Go program carries about itself: its main module, every module linked
into it (path, version, go.sum hash, replacement) and its build settings, as `go version -m`
prints them, read from the executable's bytes without a Go toolchain.

Go (1.18 and later) writes a 32-byte header starting with `\\xff Go buildinf:` into the data of
every executable; with the "inline" flag set, the Go version and the module information follow
it as two strings, each prefixed by its length as an unsigned varint
(src/debug/buildinfo/buildinfo.go). The module information is wrapped in two 16-byte sentinels
and holds tab-separated lines: `path`, `mod`, `dep`, `=>` (the replacement of the line above),
`build` (runtime/debug.ParseBuildInfo).
"""

from __future__ import annotations

from dataclasses import dataclass, field

MAGIC = b"\xff Go buildinf:"
HEADER_SIZE = 32
FLAG_INLINE = 0x2
SENTINEL = 16


class BuildInfoError(ValueError):
    """The bytes carry no build information this reader understands."""


@dataclass(frozen=True)
class Module:
    path: str
    version: str
    sum: str = ""
    replaced_by: Module | None = None


@dataclass(frozen=True)
class BuildInfo:
    go_version: str
    path: str
    main: Module | None
    deps: tuple[Module, ...]
    settings: dict[str, str] = field(default_factory=dict)


def _varint_bytes(data: bytes, offset: int) -> tuple[bytes, int]:
    length = shift = 0
    while True:
        if offset >= len(data) or shift > 63:
            raise BuildInfoError("truncated build information")
        byte = data[offset]
        offset += 1
        length |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            break
    end = offset + length
    if end > len(data):
        raise BuildInfoError("truncated build information")
    return data[offset:end], end


def _module(fields: list[str]) -> Module:
    if len(fields) < 2:
        raise BuildInfoError(f"malformed module line: {fields}")
    return Module(path=fields[0], version=fields[1], sum=fields[2] if len(fields) > 2 else "")


def parse_modinfo(go_version: str, text: str) -> BuildInfo:
    """The build information of `go version -m`'s module lines (sentinels already removed)."""
    path = ""
    main: Module | None = None
    deps: list[Module] = []
    settings: dict[str, str] = {}
    for line in text.splitlines():
        kind, _, rest = line.partition("\t")
        fields = rest.split("\t") if rest else []
        if kind == "path":
            path = rest
        elif kind == "mod":
            main = _module(fields)
        elif kind == "dep":
            deps.append(_module(fields))
        elif kind == "=>":
            replacement = _module(fields)
            if deps:
                last = deps.pop()
                deps.append(Module(last.path, last.version, last.sum, replacement))
            elif main is not None:
                main = Module(main.path, main.version, main.sum, replacement)
        elif kind == "build":
            key, _, value = rest.partition("=")
            settings[key] = value
    return BuildInfo(
        go_version=go_version, path=path, main=main, deps=tuple(deps), settings=settings
    )


def read(executable: bytes) -> BuildInfo:
    """The build information of a Go executable (any of ELF, Mach-O or PE: the header is found
    by its magic, which Go aligns to 16 bytes)."""
    start = executable.find(MAGIC)
    while start != -1 and start % 16:
        start = executable.find(MAGIC, start + 1)
    if start == -1:
        raise BuildInfoError("no Go build information (not a Go program, or built before 1.18)")
    header = executable[start : start + HEADER_SIZE]
    if len(header) < HEADER_SIZE or not header[15] & FLAG_INLINE:
        raise BuildInfoError("Go build information in the pre-1.18 (pointer) format")
    go_version, offset = _varint_bytes(executable, start + HEADER_SIZE)
    modinfo, _ = _varint_bytes(executable, offset)
    # the sentinels are binary; what they wrap is text
    if len(modinfo) >= 2 * SENTINEL + 1 and modinfo[-SENTINEL - 1 : -SENTINEL] == b"\n":
        modinfo = modinfo[SENTINEL:-SENTINEL]
    try:
        return parse_modinfo(go_version.decode(), modinfo.decode())
    except UnicodeDecodeError as error:
        raise BuildInfoError(f"Go build information is not text: {error}") from error
