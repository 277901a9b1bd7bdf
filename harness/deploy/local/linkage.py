"""Do the module jars of a hybrid link? Each RocketMQ module jar's references (classes, fields, methods) into
module jars of another version are looked up in those jars' classes, through their superclasses and
interfaces, before anything starts: broker 5.3.4 calls BrokerConfig.getPopPollingMapExpireTimeSeconds(), which
rocketmq-common 5.3.3 lacks, and would otherwise die in start-up with a NoSuchMethodError.

The class files are read directly (the constant pool, the field and method tables; JVMS chapter 4). A reference
whose lookup leaves the module jars (a JDK or third-party superclass) counts as found: the check names what is
certainly missing, never what might be.

A reference from a class that runs only when a broker setting turns it on (``GUARDED``: 5.5.1's
AuthorizationPipeline calls rocketmq-auth 5.5.0's evaluator only with authorizationEnabled) is not a reason to
refuse the hybrid: it is kept with its setting, and a variant that turns the setting on is refused instead; any
other reference that does not link refuses the hybrid in one line (``check_links``).
"""

from __future__ import annotations

import struct
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from harness.contracts.modules import ModuleJar
from harness.core.errors import ConfigError

_CLASS, _FIELD, _METHOD, _IMETHOD, _NAME_TYPE, _UTF8 = 7, 9, 10, 11, 12, 1
# Constant-pool entry sizes after the tag byte, by tag (Utf8 is sized by its own length).
_OBJECT_METHODS = {"<init>", "clone", "equals", "finalize", "getClass", "hashCode", "notify", "notifyAll",
                   "toString", "wait"}
_SIZES = {3: 4, 4: 4, 5: 8, 6: 8, 7: 2, 8: 2, 9: 4, 10: 4, 11: 4, 12: 4, 15: 3, 16: 2, 17: 4, 18: 4, 19: 2, 20: 2}


@dataclass
class ClassInfo:
    name: str  # internal form: org/apache/rocketmq/common/BrokerConfig
    jar: str
    superclass: str | None
    interfaces: tuple[str, ...]
    members: set[tuple[str, str]] = field(default_factory=set)  # (name, descriptor), fields and methods
    refs: set[tuple[str, str, str]] = field(default_factory=set)  # (class, member name, descriptor)
    classes: set[str] = field(default_factory=set)  # classes named in the constant pool


def parse_class(data: bytes, jar: str) -> ClassInfo:
    """The name, supertypes, declared members and references of one class file."""
    if data[:4] != b"\xca\xfe\xba\xbe":
        raise ValueError("not a class file")
    count = struct.unpack_from(">H", data, 8)[0]
    pool: list[tuple[int, object]] = [(0, None)] * count
    pos, i = 10, 1
    while i < count:
        tag = data[pos]
        if tag == _UTF8:
            n = struct.unpack_from(">H", data, pos + 1)[0]
            pool[i] = (tag, data[pos + 3:pos + 3 + n].decode("utf-8", "replace"))
            pos += 3 + n
        else:
            size = _SIZES[tag]
            pool[i] = (tag, struct.unpack_from(">HH", data, pos + 1) if size == 4 and tag in (9, 10, 11, 12)
                       else struct.unpack_from(">H", data, pos + 1)[0] if size == 2 else None)
            pos += 1 + size
        i += 2 if tag in (5, 6) else 1

    def utf8(idx: int) -> str:
        return str(pool[idx][1])

    def class_name(idx: int) -> str:
        return utf8(int(pool[idx][1]))  # type: ignore[arg-type]

    _access, this, sup, n_if = struct.unpack_from(">HHHH", data, pos)
    pos += 8
    interfaces = tuple(class_name(struct.unpack_from(">H", data, pos + 2 * k)[0]) for k in range(n_if))
    pos += 2 * n_if
    info = ClassInfo(class_name(this), jar, class_name(sup) if sup else None, interfaces)
    for _table in range(2):  # fields, then methods
        n = struct.unpack_from(">H", data, pos)[0]
        pos += 2
        for _ in range(n):
            _acc, name, desc, attrs = struct.unpack_from(">HHHH", data, pos)
            pos += 8
            info.members.add((utf8(name), utf8(desc)))
            for _a in range(attrs):
                pos += 6 + struct.unpack_from(">I", data, pos + 2)[0]
    for tag, value in pool:
        if tag == _CLASS:
            info.classes.add(utf8(int(value)))  # type: ignore[arg-type]
        elif tag in (_FIELD, _METHOD, _IMETHOD):
            owner, nat = value  # type: ignore[misc]
            name, desc = pool[nat][1]  # type: ignore[misc]
            info.refs.add((class_name(owner), utf8(name), utf8(desc)))
    return info


def read_jar(jar: Path) -> Iterator[ClassInfo]:
    with zipfile.ZipFile(jar) as z:
        for entry in z.namelist():
            if entry.endswith(".class") and not entry.startswith("META-INF/") and entry != "module-info.class":
                yield parse_class(z.read(entry), jar.name)


# Classes (internal names, a prefix matches their inner classes too) whose code runs only when a broker setting
# is true (read from the bytecode: the first thing their entry points test), by setting. All default to false
# and the harness turns none of them on.
GUARDED = {
    "org/apache/rocketmq/broker/auth/pipeline/AuthorizationPipeline": "authorizationEnabled",
    "org/apache/rocketmq/broker/auth/pipeline/AuthenticationPipeline": "authenticationEnabled",
}


@dataclass(frozen=True)
class Break:
    """A reference from one module jar into another that the other does not hold."""

    source: str  # the jar holding the reference
    referrer: str  # the class holding it
    target: str  # the class referred to, dotted
    member: str  # "name(args)result" of a method, "name:type" of a field, "" when the class itself is missing
    target_jar: str = ""  # the jar that lacks it (holds the class, or the package of a missing class)

    @property
    def guard(self) -> str | None:
        """The broker setting without which the referring code never runs (None: it may run in any broker)."""
        return next((s for prefix, s in GUARDED.items() if self.referrer.split("$")[0] == prefix), None)

    def __str__(self) -> str:
        what = f"{self.target}.{self.member}" if self.member else f"class {self.target}"
        return f"{self.source} ({self.referrer.replace('/', '.')}) needs {what}, not in {self.target_jar}"


def _found(classes: dict[str, ClassInfo], owner: str, member: tuple[str, str]) -> bool:
    """The member in ``owner`` or a supertype; True when the lookup reaches a class outside the jars."""
    seen: set[str] = set()
    todo = [owner]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        info = classes.get(name)
        if name == "java/lang/Object":
            if member[0] in _OBJECT_METHODS:
                return True
        elif info is None:
            return True  # a JDK or third-party supertype: cannot tell, so not a break
        elif member in info.members:
            return True
        else:
            todo += [s for s in (info.superclass, *info.interfaces) if s]
    return False


def breaks(jars: Iterable[tuple[Path, str]]) -> list[Break]:
    """Every reference from a module jar into a package held by module jars of another version that those jars
    cannot satisfy. ``jars``: (jar, its module version)."""
    classes: dict[str, ClassInfo] = {}
    version_of_jar: dict[str, str] = {}
    packages: dict[str, dict[str, str]] = {}  # package -> version -> a jar of that version holding it
    for jar, version in jars:
        version_of_jar[jar.name] = version
        for info in read_jar(jar):
            classes.setdefault(info.name, info)
            packages.setdefault(info.name.rpartition("/")[0], {}).setdefault(version, jar.name)
    out: list[Break] = []
    for info in classes.values():
        mine = version_of_jar[info.jar]
        for cls in sorted(info.classes):
            name = cls.lstrip("[")
            if name.startswith("L"):
                name = name[1:].rstrip(";")
            holders = {v: j for v, j in packages.get(name.rpartition("/")[0], {}).items() if v != mine}
            if name not in classes and holders:
                out.append(Break(info.jar, info.name, name.replace("/", "."), "", sorted(holders.values())[0]))
        for owner, name, desc in sorted(info.refs):
            target = classes.get(owner)
            if target is None or version_of_jar[target.jar] == mine:
                continue
            if not _found(classes, owner, (name, desc)):
                member = f"{name}{desc}" if desc.startswith("(") else f"{name}:{desc}"  # a method, or a field
                out.append(Break(info.jar, info.name, owner.replace("/", "."), member, target.jar))
    return out


def check_links(version: str, lib: Path, modules: Sequence[ModuleJar]) -> list[tuple[str, str]]:
    """A hybrid's module jars link, but for references in code behind a broker setting (returned with it);
    otherwise a ConfigError naming the first reference that does not and the jar that lacks it."""
    found = breaks([(lib / f"{m.artifact}-{m.version}.jar", m.version) for m in modules])
    hard = [b for b in found if b.guard is None]
    if hard:
        first = hard[0]
        raise ConfigError(f"RocketMQ {version} cannot be assembled from Maven Central: its modules do not link: "
                          f"{first} ({len(hard)} such reference(s)); modules of {version} that are not published "
                          f"differ from those of the release they were taken from; point the variant's jars: at a "
                          f"local build")
    return [(str(b), str(b.guard)) for b in found]
