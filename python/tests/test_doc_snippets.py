"""Every ```python block of README.md and docs/**/*.md runs (the C++ blocks: tests/docs/).

Blocks of one document run in order in one namespace. ```python requires=opencl,vulkan runs only
when those devices are available; ```python-fragment is shown, never run; a block tagged py or
python3 is an error, so that nothing meant as Python escapes the test."""
import pathlib
import re

import pytest

import kiln

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md"] + sorted((ROOT / "docs").rglob("*.md"))
FENCE = re.compile(r"^```(\S*)(.*)$")


def blocks(path):
    out, lang, attrs, start, body = [], None, "", 0, []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        m = FENCE.match(line)
        if m and lang is None:
            lang, attrs, start, body = m.group(1), m.group(2).strip(), n + 1, []
        elif line.startswith("```") and lang is not None:
            out.append((lang, attrs, start, "\n".join(body)))
            lang = None
        elif lang is not None:
            body.append(line)
    return out


def available(backend):
    return any(i["device"].type == backend and i["available"] for i in kiln.devices())


@pytest.mark.parametrize("doc", [d for d in DOCS if any(b[0] == "python" for b in blocks(d))],
                         ids=lambda d: str(d.relative_to(ROOT)))
def test_python_snippets_run(doc):
    namespace = {"__name__": "__doc_snippet__"}
    for lang, attrs, line, code in blocks(doc):
        if lang != "python":
            continue
        req = re.search(r"requires=(\S+)", attrs)
        if req and not all(available(b) for b in req.group(1).split(",")):
            continue
        exec(compile("\n" * (line - 1) + code, str(doc), "exec"), namespace)


def test_no_python_block_escapes_the_convention():
    for doc in DOCS:
        for lang, _, line, _ in blocks(doc):
            assert lang not in ("py", "python3", "Python"), f"{doc}:{line}: tag it ```python"
