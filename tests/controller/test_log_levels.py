"""`Log.debugging()`: a caller that would log a line per object asks it first (controller/log.py)."""

from __future__ import annotations

import io
import logging

from controller.log import LOGGER_NAME, Log, configure


def test_debugging_follows_the_configured_level() -> None:
    logger = logging.getLogger(LOGGER_NAME)
    level, handlers = logger.level, list(logger.handlers)
    try:
        out = io.StringIO()
        configure("info", out)
        assert not Log().debugging()
        Log().debug("x.line", n=1)
        assert out.getvalue() == ""
        configure("debug", out)
        assert Log().debugging()
        Log().debug("x.line", n=1)
        assert '"event":"x.line"' in out.getvalue()
    finally:
        logger.setLevel(level)
        logger.handlers[:] = handlers
