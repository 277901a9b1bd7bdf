"""spark.jvm's class archive: one per Spark installation in the user cache, those of installations that are gone
removed when another is built (a CI clone's virtualenv deleted would otherwise leave 165 MB behind each time)."""

from pathlib import Path

from spark import jvm


def test_archives_of_spark_installations_that_are_gone_are_removed(tmp_path, monkeypatch):
    monkeypatch.setenv("RMQ_HARNESS_CACHE", str(tmp_path))
    here = jvm.archive()
    here.parent.mkdir(parents=True)
    here.write_bytes(b"archive")  # as if built: build() then has nothing to make
    alive, gone = here.parent / "alive.jsa", here.parent / "gone.jsa"
    for jsa, made_for in ((alive, tmp_path), (gone, tmp_path / "deleted-venv")):
        jsa.write_bytes(b"archive")
        jsa.with_suffix(".spark").write_text(str(made_for))
    assert jvm.build(log=lambda line: None) == here
    assert sorted(p.name for p in here.parent.iterdir()) == sorted(
        [here.name, here.with_suffix(".spark").name, "alive.jsa", "alive.spark"])
    assert Path(here.with_suffix(".spark").read_text()).is_dir()


def test_the_driver_maps_the_archive_only_when_there_is_one(tmp_path, monkeypatch):
    monkeypatch.setenv("RMQ_HARNESS_CACHE", str(tmp_path))
    assert jvm.driver_options() == jvm.JIT and jvm.executor_options() == jvm.JIT
    jvm.archive().parent.mkdir(parents=True)
    jvm.archive().write_bytes(b"archive")
    assert jvm.driver_options().split() == [jvm.JIT, f"-XX:SharedArchiveFile={jvm.archive()}", *jvm.QUIET]
