"""attn_lib.book.toy re-exports its topic modules' public names: no two modules may export the same name (the later
module's object would silently shadow the earlier one's)."""

import collections
import importlib

import attn_lib.book.toy

TOPICS = ["vanishing", "distance", "separability", "sensitivity", "multihead"]


def test_topic_modules_export_distinct_names():
    owners = collections.defaultdict(list)
    for topic in TOPICS:
        for name in importlib.import_module(f"attn_lib.book.toy.{topic}").__all__:
            owners[name].append(topic)
    clashes = {name: mods for name, mods in owners.items() if len(mods) > 1}
    assert not clashes, f"names exported by several attn_lib.book.toy modules: {clashes}"


def test_every_exported_name_is_reachable_from_the_package():
    for topic in TOPICS:
        module = importlib.import_module(f"attn_lib.book.toy.{topic}")
        for name in module.__all__:
            assert getattr(attn_lib.book.toy, name) is getattr(module, name), f"{topic}.{name}"


def test_the_package_lists_exactly_its_modules_names():
    """``attn_lib.book.toy.__all__`` is the union of its topic modules' ``__all__`` (no more, no less)."""
    exported = [name for topic in TOPICS for name in importlib.import_module(f"attn_lib.book.toy.{topic}").__all__]
    assert sorted(attn_lib.book.toy.__all__) == sorted(exported)
