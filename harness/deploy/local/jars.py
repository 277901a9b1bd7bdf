"""RocketMQ server jars from Maven Central, cached per version under the user's cache directory.

Maven resolves the dependency tree of rocketmq-proxy (which pulls in the broker and store),
rocketmq-namesrv and rocketmq-tools from a generated pom (harness.deploy.local.maven); the jars land in a
temporary directory that is renamed into place only when complete, so an interrupted fetch never leaves a half
cache. A release some of whose modules are not published is assembled as a hybrid (harness.deploy.local.assembly)
and its jars must link (harness.deploy.local.linkage). What came from where is in the cache's complete.json and,
per jar, in each run's manifest (harness.contracts.modules).
"""

from __future__ import annotations

import dataclasses
import fcntl
import json
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from harness.core.errors import ConfigError, HarnessError
from harness.core.paths import cache_dir
from harness.deploy.local import maven
from harness.deploy.local.assembly import Assembly, assembly, http_get, is_release, listings
from harness.deploy.local.distribution import Distribution, inspect_lib
from harness.deploy.local.linkage import check_links

_MARKER = "complete.json"
# A hybrid whose jars did not link: the plan (module -> version) and the refusal, so that the same plan is
# refused again without a fetch; a module published since changes the plan and is fetched.
_REFUSED = "refused.json"


@contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def version_dir(version: str) -> Path:
    return cache_dir() / "rocketmq" / version


def _plan(version: str, fetch: Callable[[str], bytes], log: Callable[[str], None]) -> Assembly | None:
    """The release's assembly when it may need modules of another release (None: every module is published for
    it, the version is not a plain release, or the listings cannot be read: Maven is then asked for the release's
    own modules, as written, and says which is missing)."""
    if not is_release(version):
        return None
    try:
        listed_versions = listings(fetch)
    except HarnessError as e:  # e.g. Maven reaches a mirror that this lookup cannot: fetch as published
        log(f"{e}; fetching RocketMQ {version} as published, without modules of earlier releases")
        return None
    plan = assembly(version, listed_versions)
    why = plan.why_not()
    if why:
        raise ConfigError(f"RocketMQ {version} cannot be assembled: {why}; pick another version or point the "
                          "variant's jars: at a local build")
    return plan if plan.fills else None


def ensure_version(version: str, log: Callable[[str], None] = print,
                   fetch: Callable[[str], bytes] = http_get) -> Distribution:
    """Return the cached jars of ``version``, fetching them from Maven Central the first time (a hybrid when
    some of its modules are not published there: harness.deploy.local.assembly)."""
    root = version_dir(version)
    lib = root / "lib"
    with _locked(root.parent / f"{version}.lock"):
        if (root / _MARKER).exists():
            return _with_record(inspect_lib(lib, version, root / "conf"), root / _MARKER)
        mvn = shutil.which("mvn")
        if not mvn:
            raise HarnessError("mvn not found on PATH: install Maven (apt-get install maven) or run make setup")
        plan = _plan(version, fetch, log)
        refused = root / _REFUSED
        if plan and refused.exists():  # the same plan did not link before: no second fetch to find that out
            record = json.loads(refused.read_text())
            if record.get("versions") == plan.versions:
                raise ConfigError(record["why"])
        log(f"fetching RocketMQ {version} from Maven Central ..." + (
            f" (modules not published for {version} from the newest earlier release of its line: "
            f"{', '.join(f'{a} {v}' for a, v in plan.fills.items())}, those its tree needs)" if plan else ""))
        started = time.monotonic()
        root.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=root, prefix=".fetch-") as tmp:
            tmp_path = Path(tmp)
            maven.resolve(mvn, version, tmp_path, plan)
            fetched = inspect_lib(tmp_path / "lib", version, tmp_path / "conf")
            try:
                unlinked = check_links(version, tmp_path / "lib", fetched.modules) if fetched.hybrid else []
            except ConfigError as e:
                if plan:
                    refused.write_text(json.dumps({"versions": plan.versions, "why": str(e)}, indent=2))
                raise
            if lib.exists():
                shutil.rmtree(lib)
            shutil.rmtree(root / "conf", ignore_errors=True)
            (tmp_path / "lib").rename(lib)
            (tmp_path / "conf").rename(root / "conf")
        jars = list(lib.glob("*.jar"))
        dist = inspect_lib(lib, version, root / "conf")
        size = sum(j.stat().st_size for j in jars)
        meta: dict[str, object] = {
            "version": version,
            "jars": len(jars),
            "bytes": size,
            "fetch_seconds": round(time.monotonic() - started, 1),
            "modules": {m.artifact: m.version for m in dist.modules},
            "hybrid": dist.hybrid,
            "unlinked": [{"reference": r, "runs_only_with": s} for r, s in unlinked],
        }
        (root / _MARKER).write_text(json.dumps(meta, indent=2))
        log(f"fetched RocketMQ {version}: {len(jars)} jars, {size / 1e6:.0f} MB in {meta['fetch_seconds']} s"
            + (f"; {dist.hybrid}" if dist.hybrid else ""))
        for reference, setting in unlinked:
            log(f"RocketMQ {version}: does not link, in code that runs only with {setting}=true (never turned on "
                f"here; a variant that does is refused): {reference}")
        return _with_record(dist, root / _MARKER)


def _with_record(dist: Distribution, marker: Path) -> Distribution:
    """The distribution with what its fetch recorded (a hybrid's references in code behind a setting)."""
    try:
        meta = json.loads(marker.read_text() or "{}")
    except (OSError, json.JSONDecodeError):
        meta = {}
    rows = meta.get("unlinked", []) if isinstance(meta, dict) else []
    return dataclasses.replace(dist, unlinked=tuple((r["reference"], r["runs_only_with"]) for r in rows))


def distribution_for(version: str, jars: Path | None, log: Callable[[str], None] = print) -> Distribution:
    """The jars of a variant: its own directory when given, else the cached Maven Central set."""
    if jars is not None:
        return inspect_lib(jars.expanduser().resolve(), version, cache_dir() / "local-builds" / _slug(jars))
    return ensure_version(version, log)


def _slug(path: Path) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", str(path.expanduser().resolve())).strip("_")
