"""One JSON object per log line, in the field names the platform's Vector agent reads."""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "asctime": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "levelname": record.levelname,
            "name": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        return json.dumps(entry, ensure_ascii=False)


def setup(level: str) -> None:
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # Sanic configures its own loggers with handlers of their own; route them here instead.
    for name in ("sanic.root", "sanic.error", "sanic.access", "sanic.server", "sanic.websockets"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
