"""Reading a YAML file a user hands the harness (a scenario, a variants file): whatever is wrong with it is one
ConfigError line naming the file."""

from __future__ import annotations

from pathlib import Path

import yaml

from harness.core.errors import ConfigError, first_line, one_line


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
        return yaml.safe_load(text)
    except RecursionError:
        raise ConfigError(f"{where}: not valid YAML: nested too deeply") from None
    except Exception as e:  # noqa: BLE001 - YAMLError, and ValueError & co. from bad scalars (a date 2024-13-45)
        raise ConfigError(f"{where}: not valid YAML: {first_line(e)}") from None
