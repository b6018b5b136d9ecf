"""Direct S3 uploads and listings (``lance_table.storage.s3_direct``): signatures equal botocore's,
objects and listings equal s3fs's, conditional creates keep their one-winner rule, and s3fs for
what the direct client must not or cannot send."""

from __future__ import annotations

import datetime as dt
import hashlib
import socket

import lance
import pyarrow as pa
import pytest
from botocore.auth import S3SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

import lance_table as lt
from lance_table.storage import open_storage
from lance_table.storage.s3_direct import DirectS3, SigV4, _listing

NOW = dt.datetime(2026, 3, 4, 5, 6, 7, tzinfo=dt.timezone.utc)


@pytest.mark.parametrize(
    ("method", "url", "query", "body"),
    [
        ("PUT", "http://127.0.0.1:9000/bkt/_versions/2.manifest", "", b"manifest bytes"),
        ("PUT", "https://bkt.s3.eu-west-1.amazonaws.com/a%20b%2Bc", "", b""),
        ("GET", "http://127.0.0.1:9000/bkt", "delimiter=%2F&list-type=2&prefix=ds%2F_versions%2F", b""),
    ],
)
def test_signature_of_uploads_and_listings_is_botocores(method, url, query, body):  # type: ignore[no-untyped-def]
    host = url.split("/")[2].removesuffix(":443")
    path = "/" + url.split("/", 3)[3]
    payload = hashlib.sha256(body).hexdigest()
    extra = {"content-length": str(len(body)), "if-none-match": "*"} if method == "PUT" else {}
    ours = SigV4("eu-west-1").headers(host, path, extra, "AKID", "secret", None, NOW, method, query, payload)
    request = AWSRequest(
        method=method,
        url=f"{url}?{query}" if query else url,
        data=body,
        headers={k: v for k, v in ours.items() if k not in ("host", "authorization")},
    )
    request.context["timestamp"] = NOW.strftime("%Y%m%dT%H%M%SZ")
    signer = S3SigV4Auth(Credentials("AKID", "secret", None), "s3", "eu-west-1")
    canonical = signer.canonical_request(request)
    signature = signer.signature(signer.string_to_sign(request, canonical), request)
    assert ours["authorization"].endswith(f"Signature={signature}")


def test_a_listing_document_is_read_as_botocore_reads_it():  # type: ignore[no-untyped-def]
    doc = (
        b'<?xml version="1.0" encoding="UTF-8"?>'
        b'<ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><EncodingType>url</EncodingType>'
        b"<IsTruncated>true</IsTruncated><Contents><Key>p/a+b%2Bc%C3%A9</Key></Contents>"
        b"<CommonPrefixes><Prefix>p/d%26e/</Prefix></CommonPrefixes></ListBucketResult>"
    )
    assert _listing(doc) == (["p/a b+c\u00e9"], ["p/d&e/"], True)
    plain = doc.replace(b"<EncodingType>url</EncodingType>", b"").replace(b"true", b"false")
    assert _listing(plain) == (["p/a+b%2Bc%C3%A9"], ["p/d%26e/"], False)


@pytest.mark.s3
def test_uploads_and_listings_equal_s3fs(s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    storage = open_storage(s3_uri, s3_options)
    fs = storage.fs
    names = ["a b.bin", "c+d=e.bin", "f%20g.bin", "h\u00e9~.bin", "i&j.bin"]
    s3_requests.reset()
    for k, name in enumerate(names):
        storage.write(f"dir/{name}", bytes([k]) * (k * 1000))
    storage.put_if_absent("dir/sub/x.manifest", b"created")
    assert s3_requests.counts == {"PUT": 6}
    for k, name in enumerate(names):
        assert fs.cat_file(f"{s3_uri.removeprefix('s3://')}/dir/{name}") == bytes([k]) * (k * 1000)
    assert fs.cat_file(f"{s3_uri.removeprefix('s3://')}/dir/sub/x.manifest") == b"created"
    s3_requests.reset()
    page = storage.list_names_page("dir")
    assert page == (sorted(names), None)
    assert s3_requests.counts == {"LIST": 1}
    listed = []
    first = storage.list_names_page("dir", limit=2)
    while True:
        assert first is not None
        listed += first[0]
        if first[1] is None:
            break
        first = storage.list_names_page("dir", start_after=first[1], limit=2)
    assert listed == sorted(names)
    assert storage._direct.usable


@pytest.mark.s3
def test_a_direct_conditional_create_has_one_winner(s3_uri, s3_options, s3_requests):  # type: ignore[no-untyped-def]
    storage = open_storage(s3_uri, s3_options)
    storage.put_if_absent("_versions/1.manifest", b"first")
    storage.put_if_absent("_versions/1.manifest", b"first")  # our own write, sent again: no conflict
    s3_requests.reset()
    with pytest.raises(FileExistsError):
        storage.put_if_absent("_versions/1.manifest", b"second")
    assert s3_requests.counts == {"PUT": 1, "GET": 1}  # the loser reads the winner's bytes once
    assert storage.read("_versions/1.manifest") == b"first"


@pytest.mark.s3
def test_pylance_reads_what_direct_commits_wrote(s3_uri, s3_options):  # type: ignore[no-untyped-def]
    data = pa.table({"id": list(range(300)), "s": [f"v{i % 7}" for i in range(300)]})
    lt.write_dataset(data, s3_uri, storage_options=s3_options, max_rows_per_file=100)
    ours = lt.dataset(s3_uri, storage_options=s3_options)
    ours.delete("id % 3 = 0")
    lt.write_dataset(data.slice(0, 10), s3_uri, mode="append", storage_options=s3_options)
    theirs = lance.dataset(s3_uri, storage_options=s3_options)
    assert theirs.version == 3
    expected = lt.dataset(s3_uri, storage_options=s3_options).to_table()
    assert theirs.to_table().equals(expected)
    assert expected.num_rows == 210


@pytest.mark.s3
def test_uploads_with_extra_arguments_stay_on_s3fs(s3_uri, s3_options):  # type: ignore[no-untyped-def]
    storage = open_storage(s3_uri, {**s3_options, "aws_server_side_encryption": "AES256"})
    assert storage._direct is not None and not storage._direct.writes
    storage.write("f.bin", b"x")
    storage.put_if_absent("g.bin", b"y")
    bucket, _, prefix = s3_uri.removeprefix("s3://").partition("/")
    for name in ("f.bin", "g.bin"):  # s3fs sent the encryption argument with each upload
        head = storage.fs.call_s3("head_object", Bucket=bucket, Key=f"{prefix}/{name}")
        assert head.get("ServerSideEncryption") == "AES256"
    assert storage.read("f.bin") == b"x"


@pytest.mark.s3
def test_a_failed_direct_upload_goes_through_s3fs(s3_uri, s3_options):  # type: ignore[no-untyped-def]
    storage = open_storage(s3_uri, s3_options)
    with socket.socket() as closed:  # a port nothing listens on: the connection is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    storage._direct = DirectS3("http", f"127.0.0.1:{port}", "us-east-1", False, ("a", "b", None), (1.0, 1.0))
    storage.write("f.bin", b"written")
    storage.put_if_absent("g.bin", b"created")
    with pytest.raises(FileExistsError):
        storage.put_if_absent("g.bin", b"other")
    assert storage.list_names_page("") == (["f.bin", "g.bin"], None)
    assert storage.fs.cat_file(f"{s3_uri.removeprefix('s3://')}/f.bin") == b"written"
