"""One JSON object per log line, in the field names the platform's Vector agent reads
(asctime, levelname, name, message), plus the request and trace ids of the request being served."""

from __future__ import annotations

import contextvars
import json
import logging
import logging.handlers
import sys
import time
from pathlib import Path

request_id: contextvars.ContextVar[str | None] = contextvars.ContextVar("request_id", default=None)


def _trace_ids() -> tuple[str, str] | None:
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return None
    return f"{ctx.trace_id:032x}", f"{ctx.span_id:016x}"


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, object] = {
            # The platform's Vector agent parses exactly this: "%F %T,%3f" in UTC, no zone.
            "asctime": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(record.created)) + f",{int(record.msecs):03d}",
            "levelname": record.levelname,
            "name": record.name,
            "message": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict):
            entry.update({k: v for k, v in fields.items() if k not in entry})
        rid = request_id.get()
        if rid:
            entry["request_id"] = rid
        ids = _trace_ids()
        if ids:
            entry["trace_id"], entry["span_id"] = ids
        if record.exc_info:
            entry["exc_info"] = self.formatException(record.exc_info)
        # Text decoded with surrogateescape (request heads) or lone surrogates (JSON
        # escapes) cannot be written as UTF-8; replace them so the line is always valid UTF-8 JSON.
        return json.dumps(entry, ensure_ascii=False).encode("utf-8", "replace").decode("utf-8")


class TextFormatter(logging.Formatter):
    """For a person at a terminal: `metastore: message`, with the level when it is not INFO."""

    def format(self, record: logging.LogRecord) -> str:
        level = "" if record.levelno == logging.INFO else f"{record.levelname.lower()}: "
        line = f"metastore: {level}{record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line.encode("utf-8", "replace").decode("utf-8")


LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
FORMATS = ("auto", "text", "json")


def text_wanted(choice: str, stream: object = sys.stdout) -> bool:
    """--log-format: `text` or `json`; `auto` is text on a terminal, JSON lines elsewhere (a Job's log)."""
    if choice == "auto":
        isatty = getattr(stream, "isatty", None)
        return bool(isatty and isatty())
    return choice == "text"


def parse_levels(text: str) -> dict[str, str]:
    """`logger=LEVEL,other.logger=LEVEL` (METASTORE_LOG_LEVELS) as a dict; ValueError if malformed."""
    levels: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, level = item.partition("=")
        name, level = name.strip(), level.strip().upper()
        if not sep or not name or level not in LEVELS:
            raise ValueError(
                f"METASTORE_LOG_LEVELS: {item!r} is not logger=LEVEL with LEVEL one of {', '.join(LEVELS)}"
            )
        levels[name] = level
    return levels


def setup(level: str, file: Path | None = None, levels: dict[str, str] | None = None, text: bool = False) -> None:
    formatter: logging.Formatter = TextFormatter() if text else JsonFormatter()
    handlers: list[logging.Handler] = [logging.StreamHandler(sys.stdout)]
    if file is not None:
        # Bounded on disk: the platform's Vector agent tails it (…/<container>/*.py.json).
        handlers.append(logging.handlers.RotatingFileHandler(file, maxBytes=10 << 20, backupCount=1, encoding="utf-8"))
    for handler in handlers:
        handler.setFormatter(formatter)
    root = logging.getLogger()
    root.handlers[:] = handlers
    root.setLevel(level)
    # Sanic configures its own loggers with handlers of their own; route them here instead.
    for name in ("sanic.root", "sanic.error", "sanic.access", "sanic.server", "sanic.websockets"):
        logger = logging.getLogger(name)
        logger.handlers[:] = []
        logger.propagate = True
    # Per logger, as the platform's logging config offers it (loggers.<name>.level).
    for name, logger_level in (levels or {}).items():
        logging.getLogger(name).setLevel(logger_level)
