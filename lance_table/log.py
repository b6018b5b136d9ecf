"""pylance's ``lance.log``: the package's logger (:data:`LOGGER`, ``logging.getLogger("lance_table")``,
the parent of every ``lance_table.*`` module's logger), its level from the ``LANCE_LOG``
environment variable, and :func:`set_logger` to send its records to a file or a handler.

``LANCE_LOG`` takes pylance's form: a level (``info``, ``debug``, ``trace``, ...) optionally
followed by ``target=level`` entries, which are ignored here (they name Rust modules). Unlike
pylance, an unset ``LANCE_LOG`` leaves the logger's level alone (inherited from the root logger).
"""

from __future__ import annotations

import contextlib
import logging
import os

__all__ = [
    "ENV_NAME_PYLANCE_LOGGING_LEVEL",
    "LOGGER",
    "get_log_level",
    "get_python_log_level",
    "set_logger",
]

#: The environment variable with the log level (pylance's name for it).
ENV_NAME_PYLANCE_LOGGING_LEVEL = "LANCE_LOG"
#: The name of the package's logger.
LOGGER_NAME = "lance_table"
#: The format of :func:`set_logger`'s records when none is given (pylance's).
DEFAULT_FORMAT = "%(asctime)s %(name)s [%(levelname)s] %(filename)s:%(lineno)d %(funcName)s : %(message)s"


def get_python_log_level(rust_log_level: str) -> str:
    """The Python level name of a ``LANCE_LOG`` level (``trace``, which Python lacks, is ``DEBUG``).

    Example:
        ```python
        from lance_table.log import get_python_log_level

        assert get_python_log_level("trace") == "DEBUG"
        ```
    """
    return "DEBUG" if rust_log_level.lower() == "trace" else rust_log_level


def get_log_level() -> str:
    """The level ``LANCE_LOG`` names (its first entry without ``=``, upper case), else ``INFO``."""
    text = os.environ.get(ENV_NAME_PYLANCE_LOGGING_LEVEL, "INFO").upper()
    levels = [entry for entry in text.split(",") if entry and "=" not in entry]
    return get_python_log_level(levels[0]) if levels else "INFO"


LOGGER = logging.getLogger(LOGGER_NAME)
if os.environ.get(ENV_NAME_PYLANCE_LOGGING_LEVEL):
    with contextlib.suppress(ValueError):  # a level Python does not know: keep the default
        LOGGER.setLevel(get_log_level())


def set_logger(
    file_path: str | None = "pylance.log",
    name: str = LOGGER_NAME,
    level: int = logging.INFO,
    format_string: str | None = None,
    log_handler: logging.Handler | None = None,
) -> None:
    """Send the records of logger ``name`` (lance_table's own by default) at ``level`` and above to
    ``log_handler``, or to a new ``logging.FileHandler`` of ``file_path``, formatted with
    ``format_string`` (pylance's format by default); the logger becomes :data:`LOGGER`.

    Raises:
        OSError: ``file_path`` cannot be opened (when no handler is given).

    Example:
        ```python
        import logging
        from lance_table.log import set_logger

        set_logger(log_handler=logging.StreamHandler(), level=logging.WARNING)
        ```
    """
    global LOGGER
    LOGGER = logging.getLogger(name)
    LOGGER.setLevel(level)
    handler = log_handler if log_handler is not None else logging.FileHandler(file_path or "pylance.log")
    handler.setLevel(level)
    handler.setFormatter(logging.Formatter(format_string or DEFAULT_FORMAT))
    LOGGER.addHandler(handler)
