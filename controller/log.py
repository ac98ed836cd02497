"""JSON logs: one object per line on stderr.

Every line has `ts` (RFC 3339, UTC), `level`, `event` (a short, stable name to filter on) and
the fields the caller gave; objects are named `namespace/name`. `configure` is idempotent.
"""

from __future__ import annotations

import datetime as dt
import logging
import sys
from typing import Any

import orjson

LOGGER_NAME = "fleetplane.controller"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        payload: dict[str, Any] = {
            "ts": dt.datetime.fromtimestamp(record.created, dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if fields:
            payload.update(fields)
        if record.exc_info:
            payload["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(payload, default=str).decode()


def configure(level: str = "info", stream: Any = None) -> logging.Logger:
    logger = logging.getLogger(LOGGER_NAME)
    logger.setLevel(level.upper())
    logger.propagate = False
    for handler in list(logger.handlers):
        logger.removeHandler(handler)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter())
    logger.addHandler(handler)
    return logger


class Log:
    """`log.info("idle.warned", pod="ns/name", reason=...)`: an event name and fields."""

    def __init__(self, logger: logging.Logger | None = None) -> None:
        self._logger = logger or logging.getLogger(LOGGER_NAME)

    def _emit(self, level: int, event: str, fields: dict[str, Any]) -> None:
        if self._logger.isEnabledFor(level):
            self._logger.log(level, event, extra={"fields": fields})

    def debugging(self) -> bool:
        """Whether debug lines are written: a caller that would log one line per object (tens
        of thousands a pass at fleet scale) asks first and builds none of them otherwise."""
        return self._logger.isEnabledFor(logging.DEBUG)

    def debug(self, event: str, **fields: Any) -> None:
        self._emit(logging.DEBUG, event, fields)

    def info(self, event: str, **fields: Any) -> None:
        self._emit(logging.INFO, event, fields)

    def warning(self, event: str, **fields: Any) -> None:
        self._emit(logging.WARNING, event, fields)

    def error(self, event: str, **fields: Any) -> None:
        self._emit(logging.ERROR, event, fields)
