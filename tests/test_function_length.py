"""No function of the product, its tools or its benchmarks is longer than 80 lines: a longer one
is several ideas that want names of their own. Tests are exempt (a scenario reads top to bottom)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 80


def test_no_function_over_80_lines() -> None:
    long = []
    for folder in ("service", "devtools", "bench", "helm"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    lines = (node.end_lineno or node.lineno) - node.lineno + 1
                    if lines > LIMIT:
                        long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert long == []
