"""Reading a YAML file a user hands the harness (a scenario, a variants file): whatever is wrong with it is one
ConfigError line naming the file, and the line and column when the YAML itself is wrong. Every YAML the
harness reads goes through ``read_yaml``, so every one refuses a key given twice (PyYAML keeps the last one
silently: a variant named twice would lose its first definition without a word)."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.core.errors import ConfigError, first_line, one_line


class DuplicateKey(yaml.MarkedYAMLError):
    """A mapping that names one key twice: where each was written."""

    def __init__(self, key: object, first: yaml.Mark, again: yaml.Mark) -> None:
        super().__init__(problem=f"key {one_line(key)!r} given twice (first on line {first.line + 1})",
                         problem_mark=again)


class StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing a mapping that names one key twice (merge keys ``<<`` still override)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: dict[object, yaml.Mark] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node.start_mark)
            except TypeError:  # an unhashable key: the constructor below says so, with its mark
                continue
            if first is not key_node.start_mark:
                raise DuplicateKey(key, first, key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def load_yaml(text: str) -> object:
    """The document in ``text``, refusing duplicate keys (raises yaml.YAMLError)."""
    return yaml.load(text, Loader=StrictLoader)  # noqa: S506 - a SafeLoader subclass


def _marked(where: str, e: yaml.MarkedYAMLError) -> str:
    """``file, line L, column C: not valid YAML: problem`` (PyYAML's own text puts the mark on a later line)."""
    mark = e.problem_mark or e.context_mark
    at = f", line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
    problem = one_line(e.problem or e.context or type(e).__name__)
    return f"{where}{at}: not valid YAML: {problem}"


def read_yaml(path: Path, what: str, missing: str) -> object:
    """The document in ``path``; ``what`` names the kind of file, ``missing`` is said when there is none."""
    where = one_line(path)
    try:
        text = path.read_text()
    except FileNotFoundError:
        raise ConfigError(f"{where}: {missing}") from None
    except IsADirectoryError:
        raise ConfigError(f"{where}: is a directory, not a {what}") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{where}: not a YAML text file (byte {e.start} is not UTF-8)") from None
    except (OSError, ValueError) as e:  # no permission, a name too long, a NUL in the name
        raise ConfigError(f"{where}: cannot be read ({one_line(getattr(e, 'strerror', None) or e)})") from None
    try:
        return load_yaml(text)
    except DuplicateKey as e:
        raise ConfigError(f"{_marked(where, e)}; keep one of them") from None
    except yaml.MarkedYAMLError as e:
        raise ConfigError(_marked(where, e)) from None
    except RecursionError:
        raise ConfigError(f"{where}: not valid YAML: nested too deeply") from None
    except Exception as e:  # noqa: BLE001 - YAMLError, and ValueError & co. from bad scalars (a date 2024-13-45)
        raise ConfigError(f"{where}: not valid YAML: {first_line(e)}") from None
