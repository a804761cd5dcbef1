"""ATTN_LIB_OFFLINE is read by the Hub probe through the one environment reader (attn_lib._validation.env): a value
outside its set is refused with the variable's name, not taken as "online" (issue 35, item 11)."""

from __future__ import annotations

import pytest

import attn_lib.models.offline as O


@pytest.fixture
def no_network(monkeypatch):
    """No Hugging Face offline variable set, and a probe that would fail loudly if it reached the socket."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "ATTN_LIB_OFFLINE"):
        monkeypatch.delenv(name, raising=False)

    def connect(address, timeout):
        raise AssertionError(f"the probe reached the network ({address})")

    monkeypatch.setattr(O.socket, "create_connection", connect)


@pytest.mark.parametrize("value", ["perhaps", "2", "offline", "y e s"])
def test_a_value_outside_the_set_is_refused_naming_the_variable(no_network, monkeypatch, value):
    monkeypatch.setenv("ATTN_LIB_OFFLINE", value)
    with pytest.raises(ValueError, match=r"ATTN_LIB_OFFLINE must be one of 1, true, yes, on, 0, false, no, off"):
        O.hub_reachable()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # Hugging Face's own switch does not hide the bad value either
    with pytest.raises(ValueError, match="ATTN_LIB_OFFLINE"):
        O.hub_reachable()


@pytest.mark.parametrize("value", ["1", "true", " YES ", "on"])
def test_a_yes_value_is_offline_without_a_probe(no_network, monkeypatch, value):
    monkeypatch.setenv("ATTN_LIB_OFFLINE", value)
    assert O.hub_reachable() is False


@pytest.mark.parametrize("value", ["0", "false", "no", "Off", ""])
def test_a_no_value_probes_the_hub(no_network, monkeypatch, value):
    monkeypatch.setenv("ATTN_LIB_OFFLINE", value)
    seen = []
    monkeypatch.setattr(O.socket, "create_connection", lambda address, timeout: seen.append(address) or _Closed())
    assert O.hub_reachable(timeout=0.1) is True and len(seen) == 1


class _Closed:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False
