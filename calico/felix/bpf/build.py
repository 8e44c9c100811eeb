"""Compile ``bpf-gpl/`` C with clang into BPF ELF objects, cached by content hash.

The main program object is built once per map-size configuration; each generated policy
program is built from its source. The cache key covers the source text, every header it can
include and the flags, so an edited header or a new map size never reuses a stale object.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path

from calico.felix.bpf.libbpf import BPFError

SOURCE_DIR = Path(__file__).resolve().parents[3] / "bpf-gpl"
CFLAGS = ("-O2", "-g", "-target", "bpf", "-mcpu=v3", "-Wall", "-Wno-unused-label")
MULTIARCH_INCLUDE = "/usr/include/x86_64-linux-gnu"


def _headers_digest() -> str:
    h = hashlib.sha256()
    for p in sorted(SOURCE_DIR.glob("*.h")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


class Compiler:
    """clang wrapper with an on-disk object cache (``cache_dir``)."""

    def __init__(self, cache_dir: str, defines: dict[str, int] | None = None) -> None:
        self.cache_dir = cache_dir
        self.defines = dict(sorted((defines or {}).items()))
        self.clang = shutil.which("clang")
        if self.clang is None:
            raise BPFError("clang not found: install clang (scripts/setup-system.sh)")
        os.makedirs(cache_dir, mode=0o700, exist_ok=True)
        self.compiles = 0  # cache misses, for tests and metrics

    def flags(self) -> list[str]:
        out = [*CFLAGS, f"-I{SOURCE_DIR}"]
        if os.path.isdir(MULTIARCH_INCLUDE):
            out.append(f"-I{MULTIARCH_INCLUDE}")
        out += [f"-D{k}={v}" for k, v in self.defines.items()]
        return out

    def compile_source(self, source: str, name: str, extra: Sequence[str] = ()) -> str:
        """Path of the object for ``source`` (C text), compiling it on a cache miss."""
        flags = [*self.flags(), *extra]
        key = hashlib.sha256("\0".join([source, _headers_digest(), *flags]).encode()).hexdigest()[
            :32
        ]
        out = os.path.join(self.cache_dir, f"{name}-{key}.o")
        if os.path.exists(out):
            return out
        with tempfile.TemporaryDirectory(dir=self.cache_dir) as tmp:
            src = os.path.join(tmp, f"{name}.c")
            Path(src).write_text(source)
            obj = os.path.join(tmp, f"{name}.o")
            proc = subprocess.run(
                [self.clang, *flags, "-c", src, "-o", obj],
                capture_output=True,
                text=True,
                check=False,
            )
            if proc.returncode != 0:
                raise BPFError(f"clang failed for {name}: {proc.stderr.strip()[-2000:]}")
            os.replace(obj, out)
        self.compiles += 1
        return out

    def compile_file(self, filename: str) -> str:
        path = SOURCE_DIR / filename
        return self.compile_source(path.read_text(), path.stem)
