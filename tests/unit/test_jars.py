import zipfile
from pathlib import Path

import pytest

from harness.core.errors import ConfigError
from harness.deploy.local import distribution, jars, maven


def _fake_lib(lib: Path, skip: str = "") -> None:
    lib.mkdir(parents=True)
    for i, cls in enumerate(distribution.MAIN_CLASSES.values()):
        if cls == skip:
            continue
        with zipfile.ZipFile(lib / f"rocketmq-part{i}-5.3.3.jar", "w") as z:
            z.writestr(cls.replace(".", "/") + ".class", b"\xca\xfe")
            if i == 0:
                z.writestr("rmq.proxy.logback.xml", "<configuration/>")


def test_pom_lists_the_server_artifacts():
    pom = maven._pom("5.3.3")
    for artifact in ("rocketmq-proxy", "rocketmq-namesrv", "rocketmq-tools"):
        assert f"<artifactId>{artifact}</artifactId><version>5.3.3</version>" in pom


def test_inspect_lib_finds_classes_and_extracts_logback(tmp_path: Path):
    _fake_lib(tmp_path / "lib")
    dist = distribution.inspect_lib(tmp_path / "lib", "5.3.3", tmp_path / "conf")
    assert dist.logback["proxy"].read_text() == "<configuration/>"
    assert "namesrv" not in dist.logback
    assert dist.classpath().endswith("lib/*")


def test_inspect_lib_names_a_missing_main_class(tmp_path: Path):
    _fake_lib(tmp_path / "lib", skip=distribution.MAIN_CLASSES["proxy"])
    with pytest.raises(ConfigError, match="ProxyStartup"):
        distribution.inspect_lib(tmp_path / "lib", "5.3.3", tmp_path / "conf")


def test_missing_artifact_is_parsed_from_maven_output():
    out = ("[ERROR] Failed to execute goal on project x: Could not resolve dependencies for project: The following "
           "artifacts could not be resolved: org.apache.rocketmq:rocketmq-proxy:jar:9.9.9, "
           "org.apache.rocketmq:rocketmq-namesrv:jar:9.9.9: Could not find artifact")
    assert maven._missing_artifact(out) == "org.apache.rocketmq:rocketmq-proxy:jar:9.9.9"


def test_cached_version_is_used_without_maven(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("RMQ_HARNESS_CACHE", str(tmp_path))
    root = jars.version_dir("5.3.3")
    _fake_lib(root / "lib")
    (root / "complete.json").write_text("{}")
    monkeypatch.setenv("PATH", "")  # no mvn: the cache alone must do
    assert jars.ensure_version("5.3.3", log=lambda s: None).lib == root / "lib"
