"""Direct S3 range reads (the default client of data-file reads, ``lance_table.storage.s3_direct``):
signatures equal botocore's, objects addressed as botocore addresses them, the same bytes as s3fs
and pylance, no HEAD, s3fs for what the direct client cannot read."""

from __future__ import annotations

import datetime as dt
import itertools
import socket

import botocore.session
import lance
import numpy as np
import pyarrow as pa
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.config import Config
from botocore.credentials import Credentials

import lance_table as lt
from lance_table.storage import open_storage
from lance_table.storage.s3_direct import CHAIN, DirectS3, SigV4, open_direct_s3
from lance_table.table.readers import READERS

NOW = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize("token", [None, "session-token/+="])
@pytest.mark.parametrize(
    ("url", "extra"),
    [
        ("https://bkt.s3.eu-west-1.amazonaws.com/data/a%20b%2Bc~d.lance", {"range": "bytes=0-99"}),
        ("http://127.0.0.1:9000/bkt/_versions/1.manifest", {}),
        ("https://minio.example:443/bkt/k", {"range": "bytes=5-5"}),
    ],
)
def test_signature_is_botocores(url, extra, token):  # type: ignore[no-untyped-def]
    host = url.split("/")[2].removesuffix(":443")
    path = "/" + url.split("/", 3)[3]
    ours = SigV4("eu-west-1").headers(host, path, extra, "AKID", "secret/key+", token, NOW)
    request = AWSRequest(
        method="GET", url=url, headers={k: v for k, v in ours.items() if k not in ("host", "authorization")}
    )
    request.context["timestamp"] = NOW.strftime("%Y%m%dT%H%M%SZ")
    signer = S3SigV4Auth(Credentials("AKID", "secret/key+", token), "s3", "eu-west-1")
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    assert ours["authorization"].endswith(f"Signature={signature}")
    assert f"SignedHeaders={signer.signed_headers(signer.headers_to_sign(request))}," in ours["authorization"]


class _NotSent(Exception):
    """Stops botocore before a request leaves."""


@pytest.mark.parametrize(
    ("endpoint", "virtual", "bucket"),
    [
        (None, False, "my-bucket"),
        ("http://127.0.0.1:9000", False, "bkt"),
        ("https://store.example", True, "bkt"),
    ],
)
def test_objects_are_addressed_as_botocore_addresses_them(endpoint, virtual, bucket):  # type: ignore[no-untyped-def]
    key = "ds/data/a b+c=d~e.lance"
    style = {"addressing_style": "virtual" if virtual else "path"} if endpoint else {}  # AWS: auto
    config = Config(signature_version="s3v4", s3=style)
    client = botocore.session.get_session().create_client(
        "s3",
        region_name="eu-west-1",
        endpoint_url=endpoint,
        config=config,
        aws_access_key_id="a",
        aws_secret_access_key="b",
    )
    sent = []

    def capture(request, **kwargs):  # type: ignore[no-untyped-def]
        sent.append(request.url)
        raise _NotSent

    client.meta.events.register("before-send.s3.GetObject", capture)
    with pytest.raises(_NotSent):
        client.get_object(Bucket=bucket, Key=key)
    url = sent[0]
    scheme = endpoint.split(":")[0] if endpoint else "https"
    direct = DirectS3(scheme, endpoint.split("//")[1] if endpoint else None, "eu-west-1", virtual, None)
    host, path = direct.address(bucket, key)
    assert f"{scheme}://{host}{path}" == url


def test_which_options_read_directly():  # type: ignore[no-untyped-def]
    keys = {"key": "a", "secret": "b"}
    endpoint = {"client_kwargs": {"endpoint_url": "http://127.0.0.1:9"}}
    assert open_direct_s3({**keys, **endpoint}, "bkt", {}) is not None
    assert open_direct_s3({**keys, "client_kwargs": {"region_name": "eu-west-1"}}, "bkt", {}) is not None
    assert open_direct_s3({**endpoint}, "bkt", {}).credentials is CHAIN  # botocore's, at the first read
    assert open_direct_s3({**endpoint, "anon": True}, "bkt", {}).credentials is None
    # a dataset opened again keeps its connections
    assert open_direct_s3({**keys, **endpoint}, "bkt", {}) is open_direct_s3({**keys, **endpoint}, "bkt", {})
    assert open_direct_s3({**keys, **endpoint}, "bkt", {}) is not open_direct_s3(endpoint, "bkt", {})
    # s3fs's business: requester pays, AWS without a region, a bucket with dots on AWS, an
    # endpoint botocore takes from the environment
    assert open_direct_s3({**keys, **endpoint, "requester_pays": True}, "bkt", {}) is None
    assert open_direct_s3(keys, "bkt", {}) is None
    assert open_direct_s3(keys, "a.b.c", {"AWS_REGION": "eu-west-1"}) is None
    assert open_direct_s3(keys, "bkt", {"AWS_REGION": "cn-north-1"}) is None  # amazonaws.com.cn
    assert open_direct_s3(keys, "bkt", {"AWS_REGION": "eu-west-1", "AWS_ENDPOINT_URL_S3": "http://x"}) is None


def _table(rows: int) -> pa.Table:
    rng = np.random.default_rng(7)
    return pa.table({"id": np.arange(rows), "x": rng.random(rows), "s": [f"v{i % 11}" for i in range(rows)]})


@pytest.mark.s3
def test_reads_equal_s3fs_and_pylance_with_no_head(s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    data = _table(800)
    lance.write_dataset(
        data, s3_uri, storage_options=s3_options, max_rows_per_file=200, data_storage_version="2.2"
    )
    READERS.clear()
    ours = lt.dataset(s3_uri, storage_options=s3_options)
    assert ours._storage._direct is not None
    s3fs_only = lt.dataset(s3_uri, storage_options={**s3_options, "lance_table_s3_reader": "s3fs"})
    theirs = lance.dataset(s3_uri, storage_options=s3_options)
    s3_requests.reset()
    assert ours.to_table().equals(theirs.to_table())
    idx = [0, 199, 200, 555, 799]
    assert ours.take(idx).equals(s3fs_only.take(idx))
    assert ours.to_table(filter="id >= 300 AND id < 420").equals(
        theirs.to_table(filter="id >= 300 AND id < 420")
    )
    assert "HEAD" not in s3_requests.counts
    assert ours._storage._direct.usable  # every read above went directly


@pytest.mark.s3
def test_a_missing_object_is_one_request(s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    storage = open_storage(s3_uri, s3_options)
    s3_requests.reset()
    with pytest.raises(FileNotFoundError):
        storage.read("_versions/missing.manifest")
    assert s3_requests.counts == {"GET": 1}
    assert storage._direct.usable


@pytest.mark.s3
def test_a_failed_direct_read_goes_through_s3fs(s3_uri, s3_options):  # type: ignore[no-untyped-def]
    storage = open_storage(s3_uri, s3_options)
    data = bytes(range(256)) * 64
    storage.write("f.bin", data)
    with socket.socket() as closed:  # a port nothing listens on: the connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    storage._direct = DirectS3("http", f"127.0.0.1:{port}", "us-east-1", False, ("a", "b", None), (1.0, 1.0))
    assert storage.read("f.bin") == data
    assert [bytes(b) for b in storage.read_ranges("f.bin", [(3, 5), (9000, 100)])] == [
        data[3:8],
        data[9000:9100],
    ]


@pytest.mark.s3
def test_range_sets_of_a_file_are_exact_in_bounded_requests(s3_uri, s3_options, s3_requests, monkeypatch):  # type: ignore[no-untyped-def]
    from lance_table.storage import remote_sources, s3_direct
    from lance_table.storage.io_stats import IOStats, collecting
    from lance_table.storage.ranges import coalesce

    monkeypatch.setattr(s3_direct, "MAX_IN_FLIGHT", 3)
    monkeypatch.setattr(remote_sources, "SPLIT_READ_BYTES", 100_000)  # large reads in parts
    storage = open_storage(s3_uri, s3_options)
    blob = np.random.default_rng(3).integers(0, 256, 1_000_000, dtype=np.uint8).tobytes()
    storage.write("f.bin", blob)
    source = storage.source("f.bin", len(blob))
    rng = np.random.default_rng(4)
    for count, receiver in ((2, 1 << 30), (9, 1 << 30), (40, 1 << 30), (40, 150_000)):
        # (150 kB a receiving thread: a read's parts received by several threads at once)
        monkeypatch.setattr(remote_sources, "BYTES_PER_RECEIVER", receiver)
        lengths = rng.choice([1, 100, 5000, 250_000], count)
        ranges = [(int(rng.integers(0, len(blob) - n + 1)), int(n)) for n in lengths]
        s3_requests.reset()
        with collecting(IOStats()) as stats:
            got = source.read_ranges(ranges)
        assert [bytes(b) for b in got] == [blob[o : o + n] for o, n in ranges]
        merged, _, _ = coalesce(ranges, source.coalesce_gap)
        parts = sum(-(-n // 100_000) for _, n in merged)  # each read over 100 kB in equal parts
        assert stats.iops == len(merged) and s3_requests.counts == {"GET": parts}
        assert s3_requests.most_in_flight <= 3
    assert storage._direct.usable


@pytest.mark.s3
def test_a_read_in_parts_of_a_file_shorter_than_its_size_is_a_corrupt_file(s3_uri, s3_options, monkeypatch):  # type: ignore[no-untyped-def]
    # the manifest's size outgrows the object (a truncated file): a read in parts whose last part
    # ends past the object's end gets a shorter 206; as a one-GET read, a CorruptFileError naming it
    from lance_table.storage import remote_sources

    monkeypatch.setattr(remote_sources, "SPLIT_READ_BYTES", 100_000)  # large reads in parts
    storage = open_storage(s3_uri, s3_options)
    blob = bytes(range(256)) * 1000
    storage.write("short.bin", blob)
    source = storage.source("short.bin", len(blob) + 150_000)
    for ranges in ([(0, len(blob) + 50_000)], [(5, 10), (len(blob) - 120_000, 140_000)]):
        with pytest.raises(lt.CorruptFileError, match=r"short\.bin"):
            source.read_ranges(ranges)
    assert bytes(source.read_ranges([(7, 200_000)])[0]) == blob[7:200_007]


@pytest.mark.s3
def test_joined_ranges_are_received_in_their_places(s3_uri, s3_options, s3_requests, monkeypatch):  # type: ignore[no-untyped-def]
    # read_joined (a take's spans of a page): each range that is a request of its own is received
    # straight into its place in the one buffer; only ranges merged with others are copied there
    from lance_table.storage import remote_sources, sources

    monkeypatch.setattr(remote_sources, "SPLIT_READ_BYTES", 100_000)  # large reads in parts
    copied: list[int] = []
    placed = sources._placed

    def counting(data, dest):  # type: ignore[no-untyped-def]
        if dest is not None and data is not dest:
            copied.append(len(dest))
        return placed(data, dest)

    monkeypatch.setattr(sources, "_placed", counting)
    storage = open_storage(s3_uri, s3_options)
    blob = np.random.default_rng(5).integers(0, 256, 1_000_000, dtype=np.uint8).tobytes()
    storage.write("f.bin", blob)
    source = storage.source("f.bin", len(blob))
    gap = source.coalesce_gap
    # ranges of a request each (more than the coalescing gap apart): in parts, small, empty
    ranges = [(10, 5000), (100_000, 250_000), (500_000, 300), (600_000, 0), (999_000, 1000)]
    assert all(b[0] - sum(a) > gap for a, b in itertools.pairwise(ranges))
    s3_requests.reset()
    got = sources.read_joined(source, np.array(ranges))
    assert bytes(got) == b"".join(blob[o : o + n] for o, n in ranges)
    assert copied == [0]  # (the empty one: no request)
    assert s3_requests.counts == {"GET": 1 + 3 + 1 + 1}
    assert storage._direct.usable
    # many small ranges that merge (a take's values): read as the spans that hold them, each
    # received in its place, and gathered from there (no view made of each range)
    copied.clear()
    ranged = sources._RangedSource._read_ranges
    sliced = _ranges_per_read(monkeypatch)
    close = np.array([(7 + 40 * k, 9) for k in range(500)] + [(300_000 + 13 * k, 5) for k in range(400)])
    s3_requests.reset()
    got = sources.read_joined(source, close[::-1])
    assert bytes(got) == b"".join(blob[o : o + n] for o, n in close[::-1].tolist())
    assert copied == [] and sliced == [2]  # (two spans, each a request received in its place)
    assert s3_requests.counts == {"GET": 2}
    monkeypatch.setattr(sources._RangedSource, "_read_ranges", ranged)
    # a file shorter than the manifest says: the read into place reports a corrupt file
    short = storage.source("f.bin", len(blob) + 150_000)
    for bad in ([(0, 10), (len(blob) - 5, 20)], [(0, 10), (len(blob) - 150_000, 200_000)]):
        with pytest.raises(lt.CorruptFileError, match=r"f\.bin"):
            sources.read_joined(short, np.array(bad))


@pytest.mark.s3
def test_a_take_joins_no_spans_by_copying(s3_uri, s3_options, monkeypatch):  # type: ignore[no-untyped-def]
    # a take's scattered chunks of a page are read as spans into one buffer: received there in
    # place through the gathered first reads of the take's pages, not joined by a copy afterwards
    from lance_table.storage import sources

    rows = 40_000
    rng = np.random.default_rng(11)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 16, dtype=np.float32)), 16)
    data = pa.table({"id": np.arange(rows), "vec": vec, "s": [f"text-{i % 977}" for i in range(rows)]})
    lance.write_dataset(data, s3_uri, storage_options=s3_options, data_storage_version="2.2")
    joins: list[int] = []
    joined = sources._joined

    def counting(parts):  # type: ignore[no-untyped-def]
        if len(parts) > 1:
            joins.append(len(parts))
        return joined(parts)

    monkeypatch.setattr(sources, "_joined", counting)
    READERS.clear()
    ours = lt.dataset(s3_uri, storage_options=s3_options)
    theirs = lance.dataset(s3_uri, storage_options=s3_options)
    idx = np.arange(5, rows, 3001)  # chunks far apart: several spans of each page
    for _ in range(2):  # cold, then with the readers kept
        assert ours.take(idx).equals(theirs.take(idx))
    assert joins == []
    assert ours._storage._direct.usable


@pytest.mark.s3
@pytest.mark.parametrize("version", ["2.0", "2.2"])
def test_a_take_of_many_rows_reads_spans_not_each_rows_bytes(s3_uri, s3_options, monkeypatch, version):  # type: ignore[no-untyped-def]
    # a take of rows close together (a 2.0 page's values and offsets, a few bytes a row): the
    # source reads the spans that hold them (a few ranges a call, not one per row), cold through
    # the gathered first reads of the take's pages and again with the readers kept

    rows = 30_000
    rng = np.random.default_rng(12)
    vec = pa.FixedSizeListArray.from_arrays(pa.array(rng.random(rows * 4, dtype=np.float32)), 4)
    words = np.array([f"w{i}" * (i % 7) for i in range(300)], dtype=object)
    data = pa.table(
        {
            "id": np.arange(rows),
            "vec": vec,
            "s": pa.array(words[rng.integers(0, 300, rows)], pa.string(), mask=rng.random(rows) < 0.1),
        }
    )
    lance.write_dataset(data, s3_uri, storage_options=s3_options, data_storage_version=version)
    most = _ranges_per_read(monkeypatch)
    READERS.clear()
    ours = lt.dataset(s3_uri, storage_options=s3_options)
    theirs = lance.dataset(s3_uri, storage_options=s3_options)
    idx = np.sort(rng.choice(rows, 2000, replace=False))
    for _ in range(2):  # cold, then with the readers kept
        assert ours.take(idx).equals(theirs.take(idx))
    assert most and max(most) < 50
    assert ours._storage._direct.usable


def _ranges_per_read(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of ranges of every ranged read a source makes from now on (appended as made)."""
    from lance_table.storage import sources

    counts: list[int] = []
    ranged = sources._RangedSource._read_ranges

    def counting(self, ranges, into):  # type: ignore[no-untyped-def]
        counts.append(len(ranges))
        return ranged(self, ranges, into)

    monkeypatch.setattr(sources._RangedSource, "_read_ranges", counting)
    return counts
