"""The Lance table format as plain data: names on disk, feature flags, manifests and transactions.

Nothing here does I/O. Protobuf appears only in the ``from_pb`` / ``to_pb`` functions at the edge.
"""
