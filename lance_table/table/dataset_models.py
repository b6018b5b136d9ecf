"""Datasets of pydantic models: pylance's ``LanceDataset.from_pydantic_model``.

A part of :class:`~lance_table.table.dataset.LanceDataset`.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from lance_table.errors import InputTypeError
from lance_table.table.handle import Handle
from lance_table.table.operations.inputs import is_pydantic_model_class

if TYPE_CHECKING:
    from lance_table.table.operations.write import WriteMode


class _Models(Handle):
    """Datasets of pydantic models."""

    @classmethod
    def from_pydantic_model(
        cls,
        model_class: type,
        data: Any,
        uri: str | os.PathLike[str] | None = None,
        mode: WriteMode = "create",
        **kwargs: Any,
    ) -> Any:
        """Write ``data``, a list of instances of the pydantic model ``model_class``, with the
        model's schema (:mod:`lance_table.pydantic`) to ``uri`` (default: the class name in snake
        case), as pylance's ``from_pydantic_model``; ``kwargs`` go to ``write_dataset``.

        Raises:
            InputTypeError: ``model_class`` is not a pydantic model, ``data`` is not a list, or an
                item is not exactly a ``model_class`` (also a TypeError).
            ValueError: ``data`` is empty. Else as :func:`lance_table.write_dataset`.
        """
        from lance_table.table.operations.write_dataset import write_snapshot

        if not is_pydantic_model_class(model_class):
            raise InputTypeError(f"`model_class` must be a Pydantic BaseModel subclass, got {model_class!r}")
        from lance_table.pydantic import model_table, snake_case

        target = snake_case(model_class.__name__) if uri is None else uri
        snapshot = write_snapshot(data_obj=model_table(data, model_class), uri=target, mode=mode, **kwargs)
        return cls(snapshot)  # type: ignore[call-arg]  # (LanceDataset, which opens a snapshot)
