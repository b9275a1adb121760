"""A wrong password, on the tests' own cluster (the shared server trusts every local login, so
it cannot refuse one): a precise ``AuthenticationError`` in the API, one line and exit 2 in the
CLI."""

from __future__ import annotations

import pytest

from viewstore import AuthenticationError, EventStore, TransientStorageError

from ..cli._helpers import failed_with_one_line, run_viewstore
from ._cluster import Cluster

pytestmark = pytest.mark.postgres


def test_a_wrong_password_is_named(own_cluster: Cluster) -> None:
    with EventStore(own_cluster.url(password="not-the-password")) as store:
        for call in (store.create_schema, lambda: store.view("c")):
            with pytest.raises(AuthenticationError) as raised:
                call()
            assert 'password authentication failed for user "postgres"' in str(raised.value)
            assert f"127.0.0.1:{own_cluster.port}" in str(raised.value)
            assert not isinstance(raised.value, TransientStorageError)  # retrying cannot help


def test_the_right_password_gets_in(own_cluster: Cluster) -> None:
    with EventStore(own_cluster.url()) as store:
        assert store.schema_revision() is None  # connected: no viewstore schema there


def test_a_wrong_password_in_the_cli(own_cluster: Cluster) -> None:
    url = own_cluster.url(password="not-the-password")
    line = failed_with_one_line(run_viewstore(url, "init"))
    assert line == (
        f"the server at 127.0.0.1:{own_cluster.port} refused the login (password "
        'authentication failed for user "postgres"): check the user and password in the URL'
    )
    assert "not-the-password" not in line
