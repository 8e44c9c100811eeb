"""Template resources: ``<confdir>/conf.d/*.toml`` plus their Jinja2 templates
(design/confd.md "Templates").

A toml file names its template (``src``, under ``<confdir>/templates``), its destination
(``dest``; relative paths are under ``<confdir>``), the key prefixes it watches (``prefix`` +
``keys``; ``//NODENAME`` becomes ``/<NODENAME>``), and optionally ``check_cmd`` (``{{.src}}`` is
the staged file) and ``reload_cmd``, both run by ``/bin/sh``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

import jinja2


class ConfigError(Exception):
    """A conf.d or template problem: confd cannot start."""


@dataclass(frozen=True)
class TemplateResource:
    toml: Path
    src: str
    dest: Path
    keys: tuple[str, ...]
    check_cmd: str
    reload_cmd: str

    @property
    def daemon(self) -> str:
        """The BIRD instance the file belongs to (``bird`` or ``bird6``), from its name."""
        return "bird6" if self.dest.name.startswith("bird6") else "bird"

    def watches(self, key: str) -> bool:
        return any(key == p or key.startswith(p.rstrip("/") + "/") for p in self.keys)


def load_resources(confdir: Path, nodename: str) -> list[TemplateResource]:
    conf_d = confdir / "conf.d"
    files = sorted(conf_d.glob("*.toml"))
    if not files:
        raise ConfigError(f"no template resources (*.toml) in {conf_d}")
    out = []
    for path in files:
        try:
            data = tomllib.loads(path.read_text())["template"]
            prefix = str(data.get("prefix", "")).rstrip("/")
            keys = tuple(
                prefix + str(k).replace("//NODENAME", f"/{nodename}") for k in data["keys"]
            )
            dest = Path(str(data["dest"]))
            res = TemplateResource(
                toml=path,
                src=str(data["src"]),
                dest=dest if dest.is_absolute() else confdir / dest,
                keys=keys,
                check_cmd=str(data.get("check_cmd", "")),
                reload_cmd=str(data.get("reload_cmd", "")),
            )
        except (OSError, KeyError, TypeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"{path}: invalid template resource: {exc}") from None
        if not (confdir / "templates" / res.src).is_file():
            raise ConfigError(f"{path}: template {res.src} not found in {confdir / 'templates'}")
        out.append(res)
    return out


def environment(confdir: Path) -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(confdir / "templates")),
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        undefined=jinja2.StrictUndefined,
        extensions=["jinja2.ext.do"],
        autoescape=False,
    )
