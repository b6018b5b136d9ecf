"""Byte-range reads, small uploads and listings of S3 objects as plain signed requests (the
default client of data-file reads, commits and version listings).

s3fs sends each request through aiobotocore's whole pipeline (request model, endpoint rules,
event hooks, response parsing) on its one event-loop thread: about 1 ms of CPU per GET here, which
a scan of hundreds of small files pays hundreds of times while decoding competes for the GIL. A
GET of a byte range needs none of it: this module signs it (AWS Signature Version 4, the signing
key cached per day) and sends it from the thread that wants the bytes, on kept-alive connections
(:mod:`lance_table.storage.http_get`). The size comes from the manifest, so no HEAD is sent either.

It reads only what it can address exactly as s3fs would, from the same s3fs arguments (see
:func:`lance_table.storage.arrow_s3.arrow_arguments`, which decides the same for pyarrow's client):
an endpoint with path-style or virtual-hosted addressing, or AWS's regional endpoint with a known
region and a bucket that is a plain host name; static credentials, anonymous access, or botocore's
credential chain. Anything else (a customer key, requester pays, a profile, a proxy, an endpoint
set in the environment, ...) keeps every read on s3fs. Any answer but the bytes (an error status,
a dropped connection) sends that read to s3fs instead, which retries, follows redirects and raises
the typed errors; an answer that says the addressing or the credentials are wrong (not a missing
object, not a busy server) turns direct reads off for the storage.

Small objects (manifests, transactions, deletion files: up to :data:`MAX_PUT`) are written with
one signed PUT, conditional ones with ``If-None-Match: *``, and listings of one page are one
signed ``ListObjectsV2`` GET: s3fs spends 1.3 ms of CPU on such a PUT and 2.6 ms on such a
listing, this client about a tenth. Where s3fs would add arguments to uploads
(``s3_additional_kwargs``: server-side encryption, content types) every upload stays on s3fs;
any answer but success or a lost conditional create sends the request to s3fs again.
"""

from __future__ import annotations

import datetime as dt
import errno
import hashlib
import hmac
import re
import socket
import ssl
import threading
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import quote, unquote_plus

from lance_table._parallel import after_fork_in_child
from lance_table.storage.http_get import MAX_ERROR_BODY, Answer, KeptConnections
from lance_table.storage.http_many import get_many

#: the payload hash of a GET (the SHA-256 of no bytes), valid for S3 over http and https
EMPTY_SHA256 = hashlib.sha256(b"").hexdigest()
#: connections kept per host (the scan's reads in flight: see ``remote.REMOTE_READ_PARALLELISM``)
POOL_CONNECTIONS = 64
#: the most GETs of one read of a file in flight at once (see :meth:`DirectS3.get_ranges`)
MAX_IN_FLIGHT = 32
#: the most bytes a listing's answer may take (a page of 1000 keys of up to 1 KiB each, and more)
MAX_LISTING = 16 * 1024 * 1024
#: the largest object written with one direct PUT (larger ones go through s3fs)
MAX_PUT = 16 * 1024 * 1024
#: hosts a client keeps connections to (one per bucket with virtual-hosted addressing)
MAX_HOSTS = 4
# statuses after which direct reads go on (the object is missing, or the server is busy)
_TRANSIENT = frozenset((404, 416, 429, 500, 502, 503, 504))
# a bucket name AWS serves as a host name of its own (no dots: TLS certificates cover one label)
_HOST_BUCKET = re.compile(r"^[a-z0-9][a-z0-9-]{1,61}[a-z0-9]$")
# environment variables that move botocore's S3 endpoint elsewhere than the regional default
_ENDPOINT_ENVIRON = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_USE_FIPS_ENDPOINT",
    "AWS_USE_DUALSTACK_ENDPOINT",
)


#: credentials that botocore's chain finds (see :func:`_credential_chain`)
CHAIN = object()


class DirectReadFailed(Exception):
    """A direct GET that did not bring the bytes; the read goes to s3fs instead."""


class SigV4:
    """Signs S3 requests with AWS Signature Version 4 (header authorization)."""

    def __init__(self, region: str) -> None:
        self.region = region
        self._keys: dict[tuple[str, str], bytes] = {}
        self._stamp: tuple[int, str] = (-1, "")  # the last second's time stamp

    def _key(self, secret: str, day: str) -> bytes:
        found = self._keys.get((secret, day))
        if found is None:
            key = hmac.new(f"AWS4{secret}".encode(), day.encode(), hashlib.sha256).digest()
            for part in (self.region, "s3", "aws4_request"):
                key = hmac.new(key, part.encode(), hashlib.sha256).digest()
            self._keys = {(secret, day): key}  # one day's key: older ones are of no more use
            found = key
        return found

    def headers(
        self,
        host: str,
        path: str,
        extra: Mapping[str, str],
        access_key: str,
        secret_key: str,
        token: str | None,
        now: dt.datetime,
        method: str = "GET",
        query: str = "",
        payload: str = EMPTY_SHA256,
    ) -> dict[str, str]:
        """The headers of a request (a GET by default) of ``path`` (already percent-encoded) on
        ``host``, with ``extra`` (e.g. ``range``, lowercase names) and the signature of them all;
        ``query``: the canonical query string (names sorted, names and values percent-encoded),
        ``payload``: the SHA-256 of the body in hex."""
        second = int(now.timestamp())
        last = self._stamp
        if last[0] == second:
            stamp = last[1]
        else:
            stamp = now.strftime("%Y%m%dT%H%M%SZ")
            self._stamp = (second, stamp)
        day = stamp[:8]
        signed = {"host": host, **extra, "x-amz-content-sha256": payload, "x-amz-date": stamp}
        if token:
            signed["x-amz-security-token"] = token
        names = sorted(signed)
        canonical = "\n".join(
            [method, path, query, *(f"{n}:{signed[n].strip()}" for n in names), "", ";".join(names), payload]
        )
        scope = f"{day}/{self.region}/s3/aws4_request"
        to_sign = f"AWS4-HMAC-SHA256\n{stamp}\n{scope}\n{hashlib.sha256(canonical.encode()).hexdigest()}"
        signature = hmac.digest(self._key(secret_key, day), to_sign.encode(), "sha256").hex()
        signed["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={access_key}/{scope}, "
            f"SignedHeaders={';'.join(names)}, Signature={signature}"
        )
        return signed


class DirectS3:
    """Signed GETs of one S3 endpoint's objects, from any thread (see the module's description).

    Args:
        scheme: ``http`` or ``https``.
        host: the endpoint's host (and port), or None for AWS's regional endpoint.
        region: the region requests are signed for.
        virtual: whether the bucket goes into the host name (else into the path).
        credentials: ``(access key, secret key, session token)``, :data:`CHAIN` (botocore's
            credentials, found at the first read and refreshed as botocore refreshes them), or
            None for anonymous requests.
        timeouts: connect and read timeouts in seconds.
        ca_bundle: certificates to verify the server's with (else the system's).
        writes: whether objects may be written directly (s3fs adds no arguments to uploads).
    """

    def __init__(
        self,
        scheme: str,
        host: str | None,
        region: str,
        virtual: bool,
        credentials: Any,
        timeouts: tuple[float, float] = (60.0, 60.0),
        ca_bundle: str | None = None,
        writes: bool = True,
    ) -> None:
        self.scheme = scheme
        self.host = host
        self.virtual = virtual
        self.credentials = credentials
        self.timeouts = timeouts
        self.ca_bundle = ca_bundle
        self._signer = SigV4(region)
        self._default_port = ":443" if scheme == "https" else ":80"
        self._pools: dict[str, KeptConnections] = {}
        self._lock = threading.Lock()
        #: False once an answer said that this client cannot read the store (see the module)
        self.usable = True
        #: whether uploads may go directly: s3fs sends none of its own arguments with them
        self.writes = writes

    def _http(self, host: str) -> KeptConnections:
        """The kept connections to ``host`` (a forked child opens its own: see KeptConnections)."""
        pool = self._pools.get(host)
        if pool is None:
            with self._lock:
                pool = self._pools.get(host)
                if pool is None:
                    pool = KeptConnections(self.scheme, host, self.timeouts, POOL_CONNECTIONS, self.ca_bundle)
                    while len(self._pools) >= MAX_HOSTS:  # the oldest host's connections close
                        self._pools.pop(next(iter(self._pools))).close()
                    self._pools[host] = pool
        return pool

    def address(self, bucket: str, key: str) -> tuple[str, str]:
        """The host and the percent-encoded path of an object."""
        encoded = quote(key, safe="/~")
        if self.host is None:
            return f"{bucket}.s3.{self._signer.region}.amazonaws.com", f"/{encoded}"
        host = self.host[: -len(self._default_port)] if self.host.endswith(self._default_port) else self.host
        if self.virtual:
            return f"{bucket}.{host}", f"/{encoded}"
        return host, f"/{bucket}/{encoded}"

    def _keys(self) -> tuple[str, str, str | None] | None:
        creds = self.credentials
        if creds is None or isinstance(creds, tuple):
            return creds
        if creds is CHAIN:  # found at the first read, not when the dataset is opened
            with self._lock:
                if self.credentials is CHAIN:
                    self.credentials = _credential_chain()
                creds = self.credentials
            if creds is None:
                self.usable = False
                raise DirectReadFailed("botocore found no credentials")
        frozen = creds.get_frozen_credentials()  # botocore refreshes expiring credentials here
        return frozen.access_key, frozen.secret_key, frozen.token

    def _send(
        self,
        method: str,
        host: str,
        path: str,
        extra: dict[str, str],
        *,
        query: str = "",
        body: bytes = b"",
        limit: int | None = None,
        pooled: bool = False,
    ) -> Answer:
        """One signed request's answer, whatever its status (``pooled``: see
        :meth:`KeptConnections.request`).

        Raises:
            DirectReadFailed: no answer came (a dropped connection, a timeout, credentials
                botocore cannot find).
        """
        try:
            keys = self._keys()
            if keys is None:
                headers = {"host": host, **extra}
            else:
                payload = hashlib.sha256(body).hexdigest() if body else EMPTY_SHA256
                now = dt.datetime.now(dt.timezone.utc)
                headers = self._signer.headers(host, path, extra, *keys, now, method, query, payload)
            target = f"{path}?{query}" if query else path
            return self._http(host).request(method, target, headers, body, limit, pooled)
        except Exception as exc:
            raise self._failed(exc) from None

    def _failed(self, exc: Exception) -> DirectReadFailed:
        """The error of a request that brought no answer (``exc``'s); a TLS or host name failure
        turns direct requests off."""
        if isinstance(exc, DirectReadFailed):
            return exc
        if isinstance(exc, (ssl.SSLError, socket.gaierror)):
            self.usable = False  # certificates or a host name s3fs's client sees otherwise
        return DirectReadFailed(repr(exc))

    def get(
        self, bucket: str, key: str, start: int | None = None, end: int | None = None, name: str = ""
    ) -> bytes:
        """The bytes ``[start, end)`` of an object (all of it without ``start``); ``name`` is what
        an error calls the object.

        Raises:
            FileNotFoundError: the object does not exist.
            DirectReadFailed: the answer was not the bytes (read them through s3fs instead).
        """
        return bytes(self._get(bucket, key, start, end, name, False))

    def get_range(self, bucket: str, key: str, start: int, end: int, name: str = "") -> bytes | memoryview:
        """As :meth:`get`, but a body longer than one receive lands in a kept buffer
        (a memoryview of it): no fresh pages to fault in and no copy, for the data of files.

        Raises:
            as :meth:`get`.
        """
        return self._get(bucket, key, start, end, name, True)

    def _get(
        self, bucket: str, key: str, start: int | None, end: int | None, name: str, pooled: bool
    ) -> bytes | memoryview:
        host, path = self.address(bucket, key)
        extra = {} if start is None else {"range": f"bytes={start}-{(end or 0) - 1}"}
        limit = None if start is None or end is None else end - start
        answer = self._send("GET", host, path, extra, limit=limit, pooled=pooled)
        return self._body(answer, bucket, key, start, end, name)

    def get_ranges(
        self,
        bucket: str,
        key: str,
        ranges: Sequence[tuple[int, int]],
        name: str = "",
        into: Sequence[memoryview | None] | None = None,
        share: int = 1,
    ) -> list[bytes | memoryview]:
        """The bytes of each ``(offset, length)`` range of an object (lengths above 0), as
        :meth:`get_range` reads one, all sent and received by this thread at once (at most
        :data:`MAX_IN_FLIGHT` in flight, shared by ``share`` threads doing the same: see
        :mod:`.http_many`); ``into``: for each range, a buffer of its length to receive it into
        where the answer allows (the range's bytes are then that buffer itself), or None.

        Raises:
            as :meth:`get`.
        """
        host, path = self.address(bucket, key)
        try:
            keys = self._keys()
            now = dt.datetime.now(dt.timezone.utc)
            requests = []
            sign = self._signer.headers
            for off, length in ranges:
                extra = {"range": f"bytes={off}-{off + length - 1}"}
                headers = {"host": host, **extra} if keys is None else sign(host, path, extra, *keys, now)
                requests.append((path, headers, length))
            answers = get_many(self._http(host), requests, max(1, MAX_IN_FLIGHT // share), into=into)
        except Exception as exc:
            raise self._failed(exc) from None
        return [
            self._body(answer, bucket, key, off, off + length, name)
            for answer, (off, length) in zip(answers, ranges)
        ]

    def _body(
        self, answer: Answer, bucket: str, key: str, start: int | None, end: int | None, name: str
    ) -> bytes | memoryview:
        """The bytes ``[start, end)`` of an object in ``answer`` (all of it without ``start``).

        Raises:
            as :meth:`get`.
        """
        status = answer.status
        if status == 206 or (status == 200 and start is None):
            return answer.body
        if status == 200:  # the server sent the whole object for a range
            return bytes(answer.body[start:end])
        if status == 404 and b"NoSuchKey" in answer.data:
            raise FileNotFoundError(errno.ENOENT, "no such object", name or f"s3://{bucket}/{key}")
        if status not in _TRANSIENT:
            self.usable = False  # redirected, refused or malformed: s3fs knows how to go on
        raise DirectReadFailed(f"HTTP {status}")

    def put(self, bucket: str, key: str, data: bytes, *, if_absent: bool = False, name: str = "") -> None:
        """Store ``data`` as an object (one PUT; ``if_absent``: only where no object of that key
        exists, S3's ``If-None-Match: *``); ``name`` is what an error calls the object.

        Raises:
            FileExistsError: ``if_absent`` and the object exists (412).
            OSError: ``if_absent`` and another conditional write of the key was in flight (409,
                errno EBUSY).
            DirectReadFailed: any other answer, or none (write through s3fs instead, which
                retries and raises the typed errors; the object may have been stored).
        """
        if not self.writes:
            raise DirectReadFailed("the storage options add arguments to uploads")
        host, path = self.address(bucket, key)
        extra = {"content-length": str(len(data))}
        if if_absent:
            extra["if-none-match"] = "*"
        status = self._send("PUT", host, path, extra, body=data, limit=MAX_ERROR_BODY).status
        if status == 200:
            return
        where = name or f"s3://{bucket}/{key}"
        if if_absent and status == 412:
            raise FileExistsError(errno.EEXIST, "already exists", where)
        if if_absent and status == 409:
            raise OSError(errno.EBUSY, "a concurrent conditional write", where)
        raise DirectReadFailed(f"HTTP {status}")

    def list(
        self, bucket: str, prefix: str, limit: int, start_after: str = ""
    ) -> tuple[list[str], list[str], bool]:
        """One ``ListObjectsV2`` page of the keys under ``prefix`` (delimited by ``/``), at most
        ``limit`` of them after ``start_after``: the keys, the common prefixes, and whether more
        follow.

        Raises:
            DirectReadFailed: the answer was not a listing (list through s3fs instead).
        """
        host, path = self.address(bucket, "")
        if path != "/":
            path = path.rstrip("/")  # the bucket's path (path-style addressing)
        params = {
            "delimiter": "/",
            "encoding-type": "url",
            "list-type": "2",
            "max-keys": str(limit),
            "prefix": prefix,
        }
        if start_after:
            params["start-after"] = start_after
        query = "&".join(f"{k}={quote(v, safe='-_.~')}" for k, v in sorted(params.items()))
        answer = self._send("GET", host, path, {}, query=query, limit=MAX_LISTING)
        if answer.status != 200:
            if answer.status not in _TRANSIENT:
                self.usable = False
            raise DirectReadFailed(f"HTTP {answer.status}")
        return _listing(answer.data)


def _listing(data: bytes) -> tuple[list[str], list[str], bool]:
    """The keys, common prefixes and truncation of a ``ListBucketResult`` document (its names
    URL-decoded where it says they are encoded, as botocore decodes them).

    Raises:
        DirectReadFailed: the document is not a listing.
    """
    from xml.etree import ElementTree

    try:
        root = ElementTree.fromstring(data)
    except ElementTree.ParseError as exc:
        raise DirectReadFailed(f"listing: {exc}") from None
    ns = root.tag[: root.tag.index("}") + 1] if root.tag.startswith("{") else ""
    if root.tag != f"{ns}ListBucketResult":
        raise DirectReadFailed(f"listing: a {root.tag!r} document")
    decode = unquote_plus if (root.findtext(f"{ns}EncodingType") or "") == "url" else str
    keys = [decode(e.text or "") for e in root.iterfind(f"{ns}Contents/{ns}Key")]
    prefixes = [decode(e.text or "") for e in root.iterfind(f"{ns}CommonPrefixes/{ns}Prefix")]
    truncated = (root.findtext(f"{ns}IsTruncated") or "").strip().lower() == "true"
    return keys, prefixes, truncated


def open_direct_s3(kwargs: Mapping[str, Any], bucket: str, environ: Mapping[str, str]) -> DirectS3 | None:
    """A direct client for ``bucket`` that addresses and signs as s3fs would with ``kwargs``, or
    None where it cannot (see the module's description)."""
    from lance_table.storage.arrow_s3 import arrow_arguments

    mapped = arrow_arguments(kwargs, environ)
    if mapped is None:
        return None
    host = mapped.get("endpoint_override")
    scheme = str(mapped.get("scheme", "https"))
    virtual = bool(mapped.get("force_virtual_addressing"))
    if host is None:
        if any(environ.get(name) for name in _ENDPOINT_ENVIRON) or not _HOST_BUCKET.match(bucket):
            return None
        if str(mapped["region"]).startswith(("cn-", "us-iso")):
            return None  # partitions with domains of their own
        if bucket.endswith(("-s3alias", "--ol-s3", "--x-s3")) or bucket.startswith("xn--"):
            return None  # access point aliases and directory buckets: endpoints of their own
    elif virtual and not _HOST_BUCKET.match(bucket):
        return None
    credentials: Any
    if mapped.get("anonymous"):
        credentials = None
    elif "access_key" in mapped:
        credentials = (str(mapped["access_key"]), str(mapped["secret_key"]), mapped.get("session_token"))
    else:
        credentials = CHAIN
    timeouts = (float(mapped.get("connect_timeout", 60.0)), float(mapped.get("request_timeout", 60.0)))
    bundle = environ.get("AWS_CA_BUNDLE") or None  # as botocore verifies certificates
    writes = not kwargs.get("s3_additional_kwargs")  # (server-side encryption, content types...)
    key = (scheme, host, str(mapped["region"]), virtual, credentials, timeouts, bundle, writes)
    with _CLIENTS_LOCK:
        client = _CLIENTS.pop(key, None)
        if client is None:
            region = str(mapped["region"])
            client = DirectS3(scheme, host, region, virtual, credentials, timeouts, bundle, writes)
        _CLIENTS[key] = client  # the most recently used last
        while len(_CLIENTS) > MAX_CLIENTS:
            _CLIENTS.pop(next(iter(_CLIENTS)))
    return client


#: the direct clients kept, by what they were made of: a dataset opened again (every
#: ``lance_table.dataset`` call opens its storage) reuses its kept-alive connections, as s3fs
#: reuses its filesystems
MAX_CLIENTS = 16
_CLIENTS: dict[tuple[Any, ...], DirectS3] = {}
_CLIENTS_LOCK = threading.Lock()


def _credential_chain() -> Any:
    """botocore's credentials from its usual sources (environment, files, instance metadata), or
    None where it finds none."""
    try:
        import botocore.session

        return botocore.session.get_session().get_credentials()
    except Exception:
        return None


def _after_fork() -> None:
    """A forked child's locks are free (another thread may have held one at the fork); each
    client opens connections of its own there at its first read."""
    global _CLIENTS_LOCK
    _CLIENTS_LOCK = threading.Lock()
    for client in _CLIENTS.values():
        client._lock = threading.Lock()
        client._pools = {}  # the parent's connections (and their locks) are not the child's


after_fork_in_child(_after_fork)
