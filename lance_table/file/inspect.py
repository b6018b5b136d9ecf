"""Print the structure of a Lance data file: footer, schema, columns, pages and their encodings.

Usage: ``python -m lance_table.file.inspect FILE [--pages N]``
"""

from __future__ import annotations

import argparse
import sys

from google.protobuf import text_format

from lance_table.file.container import read_metadata, unpack_encoding
from lance_table.storage.sources import open_source


def describe(path: str, max_pages: int = 3) -> str:
    """A human-readable dump of a Lance file's metadata."""
    source = open_source(path)
    meta = read_metadata(source)
    lines = [
        f"{path}: {meta.size} bytes, format {meta.version.value}, {meta.num_rows} rows, "
        f"{len(meta.columns)} columns",
        f"schema: {meta.arrow_schema}",
    ]
    for f in meta.fields:
        lines.append(
            f"  field id={f.id} parent={f.parent_id} {f.name!r} {f.logical_type} "
            f"nullable={f.nullable} encoding={f.encoding} metadata={dict(f.metadata)}"
        )
    for i, col in enumerate(meta.columns):
        _, cenc = unpack_encoding(col.encoding, source, f"column {i}")
        shown = text_format.MessageToString(cenc, as_one_line=True) if cenc is not None else None
        lines.append(f"column {i}: {shown} pages={len(col.pages)}")
        for p, page in enumerate(col.pages[:max_pages]):
            _, penc = unpack_encoding(page.encoding, source, f"column {i} page {p}")
            bufs = list(zip(page.buffer_offsets, page.buffer_sizes))
            lines.append(f"  page {p}: rows={page.length} priority={page.priority} buffers={bufs}")
            lines.append("    " + text_format.MessageToString(penc, as_one_line=True))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+")
    parser.add_argument("--pages", type=int, default=3, help="pages shown per column")
    args = parser.parse_args(argv)
    for path in args.files:
        print(describe(path, args.pages))
    return 0


if __name__ == "__main__":
    sys.exit(main())
