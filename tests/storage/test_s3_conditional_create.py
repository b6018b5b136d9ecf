"""Racing conditional creates on the test S3 server while each store is slow to land.

moto checks ``If-None-Match: *`` before it stores an object, with no lock in between; the test server
fixture serializes object writes so that, as on S3, exactly one of several racing creates wins.
"""

from __future__ import annotations

import pytest
from helpers import race_creates

from lance_table.storage import open_storage

pytestmark = pytest.mark.s3


def test_racing_creates_have_one_winner_when_stores_are_slow(s3_uri, s3_options, slow_s3_manifest_stores):
    storage = open_storage(s3_uri, s3_options)
    winners = race_creates(storage, "_versions/2.manifest", 8)
    assert len(winners) == 1, f"writers {sorted(winners)} all created the same object"
    assert storage.read("_versions/2.manifest") == f"writer {winners[0]}".encode()
