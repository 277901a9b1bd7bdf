"""Where archives and the history dataset live: a local directory or ``s3://bucket/prefix`` (any S3 API).

One scheme for users everywhere: ``s3://`` (``s3a://``, Spark's name for it, means the same). Everything goes
through pyarrow's filesystems, on the driver and in Spark's tasks alike, so no Hadoop S3 connector is needed.
The endpoint and credentials come from the usual AWS environment (AWS_ENDPOINT_URL_S3 or AWS_ENDPOINT_URL,
AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or ~/.aws, AWS_REGION): never from a URI, so they can never land in
an archive, a report or a log. A URI that carries credentials is refused.

S3 has no rename: an object appears whole when its upload completes, and a directory of objects is whole
when the file its readers open first (a run's manifest) is there; writers upload that one last.
"""

from __future__ import annotations

import os
import urllib.parse
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pyarrow.fs as pafs

from harness.core.errors import ConfigError, HarnessError, first_line, one_line

S3_SCHEMES = ("s3", "s3a")
DEFAULT_REGION = "us-east-1"
# An unreachable endpoint is said within seconds, not after the SDK's minutes of retries.
CONNECT_TIMEOUT_S = 5.0
REQUEST_TIMEOUT_S = 60.0
RETRIES = 3


def is_remote(uri: str | Path) -> bool:
    return isinstance(uri, str) and "://" in uri and not uri.startswith("file://")


def check_uri(uri: str, what: str) -> None:
    """A location a user may name: a path, file://, or s3://bucket[/prefix] without credentials in it."""
    if "://" not in uri:
        return
    parts = urllib.parse.urlsplit(uri)
    if parts.scheme == "file":
        return
    if parts.scheme not in S3_SCHEMES:
        raise ConfigError(f"{what} {one_line(uri)}: scheme {parts.scheme}:// is not supported; use a local path "
                          "or s3://bucket/prefix")
    if "@" in parts.netloc or parts.password or parts.username:
        raise ConfigError(f"{what}: credentials do not belong in a URI (they would end up in archives and logs); "
                          "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or ~/.aws/credentials) instead")
    if not parts.netloc:
        raise ConfigError(f"{what} {one_line(uri)}: no bucket; write s3://bucket/prefix")
    if parts.query or parts.fragment:
        raise ConfigError(f"{what} {one_line(uri)}: options in the URI are not read; the endpoint comes from "
                          "AWS_ENDPOINT_URL")


def dir_or_uri(text: str) -> Path | str:
    """A command line's directory-or-bucket argument (type= of argparse): a Path, or the s3:// URI as written."""
    check_uri(text, "location")
    return text if is_remote(text) else Path(text)


def endpoint() -> str | None:
    return os.environ.get("AWS_ENDPOINT_URL_S3") or os.environ.get("AWS_ENDPOINT_URL") or None


def s3_filesystem() -> pafs.S3FileSystem:
    """An S3 filesystem on the endpoint and credentials of the AWS environment."""
    options: dict = {"region": os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
                     or DEFAULT_REGION,
                     "connect_timeout": CONNECT_TIMEOUT_S, "request_timeout": REQUEST_TIMEOUT_S,
                     "retry_strategy": pafs.AwsStandardS3RetryStrategy(max_attempts=RETRIES)}
    url = endpoint()
    if url:
        parts = urllib.parse.urlsplit(url if "://" in url else f"https://{url}")
        options.update(endpoint_override=parts.netloc, scheme=parts.scheme or "https")
    return pafs.S3FileSystem(**options)


@dataclass(frozen=True)
class Location:
    """A directory or file on a filesystem: ``inner`` is the path within ``fs`` (``bucket/key`` on S3),
    ``uri`` what users read (a local absolute path, or s3://bucket/key)."""

    fs: pafs.FileSystem
    inner: str
    uri: str

    @property
    def remote(self) -> bool:
        return is_remote(self.uri)

    @property
    def name(self) -> str:
        return self.inner.rstrip("/").rsplit("/", 1)[-1]

    def join(self, *parts: str) -> Location:
        inner = "/".join([self.inner.rstrip("/"), *parts])
        uri = "/".join([self.uri.rstrip("/"), *parts])
        return Location(self.fs, inner, uri)

    def below(self, root: Location) -> list[str]:
        """The parts of this location's path below ``root``'s."""
        return self.inner[len(root.inner.rstrip("/")) + 1:].split("/")

    def info(self) -> pafs.FileInfo:
        try:
            return self.fs.get_file_info(self.inner)
        except OSError as e:
            raise storage_error(self, e) from None

    def is_file(self) -> bool:
        return self.info().type == pafs.FileType.File

    def is_dir(self) -> bool:
        # On S3 a "directory" is a prefix some object has (or an empty marker object).
        return self.info().type == pafs.FileType.Directory

    def exists(self) -> bool:
        return self.info().type != pafs.FileType.NotFound

    def read_bytes(self) -> bytes:
        with self.fs.open_input_stream(self.inner) as f:
            return f.read()

    def write_bytes(self, data: bytes) -> None:
        """Whole or not at all: an S3 object appears when its upload completes; a local file is renamed."""
        if not self.remote:
            tmp = Path(self.inner).with_name(f".{self.name}.{uuid.uuid4().hex}.tmp")
            tmp.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_bytes(data)
            tmp.replace(self.inner)
            return
        with self.fs.open_output_stream(self.inner) as f:
            f.write(data)

    def files(self, recursive: bool = True) -> list[Location]:
        """Every file below this directory, in name order (none when it does not exist)."""
        selector = pafs.FileSelector(self.inner, allow_not_found=True, recursive=recursive)
        try:
            infos = self.fs.get_file_info(selector)
        except OSError as e:
            raise storage_error(self, e) from None
        base = self.inner.rstrip("/")
        return sorted((self.join(*i.path[len(base) + 1:].split("/")) for i in infos if i.type == pafs.FileType.File),
                      key=lambda loc: loc.inner)


def location(uri: str | Path, what: str = "location") -> Location:
    """The Location of a path or URI (checked as check_uri does)."""
    text = str(uri)
    check_uri(text, what)
    if not is_remote(text):
        local = text[len("file://"):] if text.startswith("file://") else text
        path = str(Path(local).expanduser().resolve())
        return Location(pafs.LocalFileSystem(), path, path)
    parts = urllib.parse.urlsplit(text)
    key = parts.path.strip("/")
    inner = f"{parts.netloc}/{key}" if key else parts.netloc
    return Location(s3_filesystem(), inner, f"s3://{inner}")


def filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem a path or URI names and the path within it (what a Spark task opens an event file by)."""
    loc = location(uri)
    return loc.fs, loc.inner


def storage_error(loc: Location, e: BaseException) -> HarnessError:
    """What went wrong with an S3 request, in one line: no bucket, credentials refused, or no answer."""
    text = str(e)
    bucket = loc.inner.split("/", 1)[0]
    if "NoSuchBucket" in text or "NO_SUCH_BUCKET" in text:
        return ConfigError(f"{loc.uri}: bucket {bucket} does not exist (create it, or name another)")
    if any(s in text for s in ("ACCESS_DENIED", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch",
                               "INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH", "Forbidden")):
        return ConfigError(f"{loc.uri}: the S3 endpoint refused the credentials ({_sdk_reason(text)}); check "
                           "AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY or ~/.aws/credentials")
    if any(s in text for s in ("NETWORK_CONNECTION", "curlCode", "Couldn't connect", "Could not resolve")):
        return ConfigError(f"{loc.uri}: no S3 endpoint answers at {endpoint() or 'the AWS default'} "
                           f"({_sdk_reason(text)}); set AWS_ENDPOINT_URL")
    return HarnessError(f"{loc.uri}: cannot be read or written ({first_line(e)[:300]})")


def _sdk_reason(text: str) -> str:
    return one_line(text.split("Detail:")[-1].strip().splitlines()[0] if text.strip() else "no detail")[:160]


def check_bucket(loc: Location) -> None:
    """The bucket of ``loc`` exists and the credentials are accepted (one line if not)."""
    bucket = loc.inner.split("/", 1)[0]
    try:
        found = loc.fs.get_file_info(bucket)
    except OSError as e:
        raise storage_error(loc, e) from None
    if found.type == pafs.FileType.NotFound:
        raise ConfigError(f"{loc.uri}: bucket {bucket} does not exist (create it, or name another)")


def check_writable(loc: Location) -> None:
    """Before anything starts: the bucket exists, the credentials are accepted and may write there (an empty
    object written and removed beside the destination)."""
    if not loc.remote:
        return
    check_bucket(loc)
    probe = loc.join(f".rmq-harness-probe-{uuid.uuid4().hex}")
    try:
        probe.write_bytes(b"")
        probe.fs.delete_file(probe.inner)
    except OSError as e:
        raise storage_error(loc, e) from None


def upload_tree(local: Path, dest: Location, last: str) -> Iterator[str]:
    """Copy every file below ``local`` to ``dest`` (same relative names), ``last`` (relative) after all the
    others so that its presence means the rest is there; yields each name as it goes."""
    names = sorted(str(p.relative_to(local)) for p in local.rglob("*") if p.is_file())
    if last not in names:
        raise HarnessError(f"{local}: has no {last}; not uploaded")
    names.remove(last)
    for rel in [*names, last]:
        target = dest.join(*rel.split("/"))
        try:
            pafs.copy_files(str(local / rel), target.inner, source_filesystem=pafs.LocalFileSystem(),
                            destination_filesystem=dest.fs)
        except OSError as e:
            raise storage_error(dest, e) from None
        yield rel
