"""Archives copied out of pods: unpacked only inside the destination, with or without tarfile's filters."""

import io
import tarfile
from pathlib import Path

import pytest

from harness.core.errors import HarnessError
from harness.deploy.k8s import transfer


def _tar(*members: tuple[str, bytes | None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            if data is None:
                info.type, info.linkname = tarfile.SYMTYPE, "/etc/passwd"
                tar.addfile(info)
            else:
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


@pytest.fixture(params=["filters", "python-3.11.2"])
def flavour(request, monkeypatch):
    if request.param != "filters":
        monkeypatch.delattr(tarfile, "data_filter")  # as on Debian bookworm's Python 3.11.2
    return request.param


def test_a_run_archive_unpacks(tmp_path, flavour):
    assert transfer.unpack(_tar(("run-1/manifest.json", b"{}")), tmp_path) == ["run-1"]
    assert (tmp_path / "run-1" / "manifest.json").read_bytes() == b"{}"


@pytest.mark.parametrize("member", [("../escape", b"x"), ("run-1/link", None)])
def test_what_leaves_the_destination_is_refused(tmp_path, flavour, member):
    with pytest.raises((HarnessError, tarfile.TarError)):
        transfer.unpack(_tar(member), tmp_path / "dest")
    assert not (tmp_path / "escape").exists()


def test_an_absolute_path_never_lands_outside(tmp_path, flavour):
    name = f"/{tmp_path.name}-abs"  # at the filesystem root if it escaped
    try:
        transfer.unpack(_tar((name, b"x")), tmp_path / "dest")
        assert (tmp_path / "dest" / name.lstrip("/")).is_file()  # the filter made it relative
    except (HarnessError, tarfile.TarError):
        pass
    assert not Path(name).exists()
