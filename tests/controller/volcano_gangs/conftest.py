"""Controller tests on the real Volcano. They sit in a folder named to sort after every other
controller test: the session's Volcano, once started, keeps running and places and restarts
work in the shared cluster, which tests written for a cluster without it (Volcano Jobs left
unprocessed) must not meet."""

from tests.controller.remediation.conftest import lab_factory

__all__ = ["lab_factory"]
