"""Racing conditional creates on the test S3 server while each store is slow to land.

moto checks ``If-None-Match: *`` before it stores an object, with no lock in between; the test server
fixture serializes object writes so that, as on S3, exactly one of several racing creates wins.
"""

from __future__ import annotations

import threading

import pytest

from lance_table.storage import open_storage

pytestmark = pytest.mark.s3


def test_racing_creates_have_one_winner_when_stores_are_slow(s3_uri, s3_options, slow_s3_manifest_stores):
    storage = open_storage(s3_uri, s3_options)
    n = 8
    barrier = threading.Barrier(n)
    winners: list[int] = []
    errors: list[BaseException] = []

    def race(i: int) -> None:
        barrier.wait()
        try:
            storage.put_if_absent("_versions/2.manifest", f"writer {i}".encode())
            winners.append(i)
        except FileExistsError:
            pass
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=race, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(winners) == 1, f"writers {sorted(winners)} all created the same object"
    assert storage.read("_versions/2.manifest") == f"writer {winners[0]}".encode()
