"""Manifests as older pylance releases wrote them: DataFile versions 0.0-0.3, no ``data_format``."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lance_table.errors import CorruptFileError
from lance_table.format import flags
from lance_table.format.manifest import DataFile, Fragment, Manifest, data_format_of
from lance_table.format.manifest_file import decode_manifest_file, encode_manifest_file
from lance_table.schema import fields_from_arrow

FIELDS = tuple(fields_from_arrow(pa.schema([pa.field("id", pa.int64())])))


@pytest.mark.parametrize(
    ("recorded", "expected"),
    [((0, 0), "0.1"), ((0, 1), "0.1"), ((0, 2), "0.1"), ((0, 3), "2.0"), ((2, 0), "2.0"), ((2, 1), "2.1")],
)
def test_recorded_file_versions_name_their_data_format(recorded, expected):
    assert data_format_of(*recorded) == expected
    assert DataFile("a.lance", (0,), (0,), *recorded).version == expected


def _encoded(file_versions, data_format, writer_flags=0, reader_flags=0) -> bytes:
    frags = tuple(
        Fragment(i, (DataFile(f"{i}.lance", (0,), (0,), *v, 10),), 5) for i, v in enumerate(file_versions)
    )
    m = Manifest(
        fields=FIELDS,
        fragments=frags,
        version=1,
        data_format=data_format,
        writer_feature_flags=writer_flags,
        reader_feature_flags=reader_flags,
    )
    return encode_manifest_file(m, b"")


@pytest.mark.parametrize(
    ("files", "writer_flags", "expected"),
    [
        ([(0, 3), (0, 3)], 0, "2.0"),  # pylance 0.13 with use_legacy_format=False
        ([(0, 3), (2, 0)], 0, "2.0"),  # ... and appended to by pylance 14
        ([(0, 0)], 0, "0.1"),  # pylance 0.10 / 0.13 legacy
        ([], flags.USE_V2_FORMAT_DEPRECATED, "2.2"),  # empty, v2 flag: "stable"
        ([], 0, "0.1"),  # empty: legacy
    ],
)
def test_a_manifest_without_data_format_gets_the_one_pylance_infers(files, writer_flags, expected):
    mf = decode_manifest_file(_encoded(files, None, writer_flags), "m")
    assert mf.manifest.data_format == ("lance", expected)
    # and records it when written again, as pylance 14 does
    again = decode_manifest_file(encode_manifest_file(mf.manifest, b""), "m2").manifest
    assert again.data_format == ("lance", expected)


def test_files_recorded_as_0_3_belong_to_a_2_0_dataset():
    m = decode_manifest_file(_encoded([(0, 3), (2, 0)], ("lance", "2.0")), "m").manifest
    assert {f.version for frag in m.fragments for f in frag.files} == {"2.0"}


@pytest.mark.parametrize(
    ("files", "data_format", "needle"),
    [
        ([(0, 3)], ("lance", "2.1"), "format 2.0 (recorded as 0.3), the manifest's format is 2.1"),
        ([(0, 2)], ("lance", "2.0"), "format 0.1"),
        ([(0, 3), (0, 0)], None, "the first data file's format is 2.0"),
    ],
)
def test_data_files_of_another_format_are_refused_as_pylance_refuses_them(files, data_format, needle):
    with pytest.raises(CorruptFileError, match=r"m\.manifest") as err:
        decode_manifest_file(_encoded(files, data_format), "m.manifest")
    assert needle in str(err.value)


def test_files_of_a_newer_format_under_a_legacy_record_decode():
    # pylance 0.16 could record 0.1 for 2.0 files; pylance reads them (and fixes the record when it
    # commits: tests/table/test_wrong_data_version.py)
    m = decode_manifest_file(_encoded([(2, 0), (0, 3)], ("lance", "0.1")), "m").manifest
    assert {f.version for frag in m.fragments for f in frag.files} == {"2.0"}


def test_the_mixed_versions_flag_allows_other_formats():
    with pytest.raises(CorruptFileError):
        decode_manifest_file(_encoded([(0, 3), (2, 1)], ("lance", "2.1")), "m")
    m = decode_manifest_file(_encoded([(0, 3), (2, 1)], ("lance", "2.1"), reader_flags=256), "m").manifest
    assert [f.version for frag in m.fragments for f in frag.files] == ["2.0", "2.1"]
