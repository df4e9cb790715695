"""A strict YAML loader for rendered manifests: a key given twice in one mapping (which PyYAML
would silently resolve to the last, and kubectl kustomize refuses) is an error. Used by
helm/validate.py and tests/packaging/test_chart_render.py."""

from __future__ import annotations

from typing import Any

import yaml  # type: ignore[import-untyped,import-not-found,unused-ignore]


class StrictLoader(yaml.SafeLoader):  # type: ignore[misc,unused-ignore]
    """PyYAML's safe loader, refusing a key given twice in one mapping."""


def _mapping(loader: StrictLoader, node: Any, deep: bool = False) -> Any:
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                "while reading a mapping", node.start_mark, f"the key {key!r} is given twice", key_node.start_mark
            )
        seen.add(key)
    return yaml.SafeLoader.construct_mapping(loader, node, deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _mapping)
