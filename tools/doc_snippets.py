#!/usr/bin/env python3
"""Turn the C++ snippets of one Markdown file into one C++ program that runs them all.

Every code snippet in README.md and docs/**/*.md is real code: tests/docs/CMakeLists.txt runs this
script on each document that has a ```cpp block, builds the generated file and registers it with
ctest as DocSnippets.<doc>. The convention, by the fence's info string:

  ```cpp                   built and run. A block that defines `int main()` is a whole program
                           (its main is called; a nonzero return fails it); any other block is
                           the body of a function, compiled after `#include "kiln.h"` and
                           `using namespace kiln;` with <cassert>, <chrono>, <cmath>, <cstdio>,
                           <cstdlib>, <iostream>, <string> and <vector> included; assert() is on. #include lines are hoisted to the
                           top of the generated file.
  ```cpp requires=opencl   built always; run only when a device of that backend (or of each
                           backend of a comma-separated list) is available, else reported as
                           skipped.
  ```text output           right after a ```cpp block: what that block prints on stdout. The
                           run must print the same lines (trailing blanks ignored, runs of blanks
                           equal, numbers equal to 1e-4 relative); a line `...` stands for any
                           number of lines.
  ```cpp-fragment          shown, never built (a piece of a larger program; keep these rare).
  anything else            (```sh, ```cmake, ```text, ...) is not run.

A block tagged c++, cxx or C++ is an error, so that nothing meant as C++ escapes the test.
Snippets of one document run in order in one process; a failure (exception, nonzero return,
output mismatch) is reported with the document's line and the others still run. `#line`
directives point compiler errors at the Markdown file.

Usage: doc_snippets.py DOC.md -o OUT.cpp [--name README.md]
       doc_snippets.py DOC.md... --list
       doc_snippets.py DOC.md... --check   (ctest DocSnippets.conventions, over every document)
"""
import argparse
import re
import sys

FENCE = re.compile(r"^( {0,3})(`{3,}|~{3,})(.*)$")
MAIN = re.compile(r"^\s*int\s+main\s*\(\s*\)", re.M)
INCLUDE = re.compile(r"^\s*#\s*include\b.*$")
CXX_ALIASES = {"c++", "cxx", "cc", "C++", "hpp", "h"}


class Block:
    def __init__(self, info, line, text):
        words = info.split()
        self.lang = words[0] if words else ""
        self.attrs = words[1:]
        self.line = line  # 1-based line of the first line of code
        self.text = text


def parse_blocks(md_text):
    blocks, lines, i = [], md_text.split("\n"), 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m or (m.group(2)[0] == "`" and "`" in m.group(3)):  # CommonMark: not a fence
            i += 1
            continue
        fence, info = m.group(2), m.group(3).strip()
        body, j = [], i + 1
        while j < len(lines):
            c = FENCE.match(lines[j])
            if c and c.group(2)[0] == fence[0] and len(c.group(2)) >= len(fence) and not c.group(3).strip():
                break
            body.append(lines[j])
            j += 1
        blocks.append(Block(info, i + 2, "\n".join(body)))
        i = j + 1
    return blocks


def cpp_string(s):
    out = ['"']
    for ch in s:
        if ch == "\\":
            out.append("\\\\")
        elif ch == '"':
            out.append('\\"')
        elif ch == "\n":
            out.append('\\n"\n    "')
        elif ch == "?":
            out.append("\\?")  # no trigraphs
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


class Snippet:
    def __init__(self, block, whole, requires):
        self.block, self.whole, self.requires, self.expected = block, whole, requires, None


def collect(md_path, blocks):
    snippets, errors, last = [], [], None
    for b in blocks:
        if b.lang in CXX_ALIASES:
            errors.append(f"{md_path}:{b.line - 1}: a ```{b.lang} block: use ```cpp (built and "
                          "run) or ```cpp-fragment (not built)")
            last = None
            continue
        if b.lang == "text" and "output" in b.attrs:
            if last is None:
                errors.append(f"{md_path}:{b.line - 1}: ```text output must follow a ```cpp block")
            elif last.expected is not None:
                errors.append(f"{md_path}:{b.line - 1}: a second ```text output for one block")
            else:
                last.expected = b.text
            continue
        if b.lang != "cpp":
            last = None
            continue
        requires = []
        for a in b.attrs:
            if a.startswith("requires="):
                requires += [r for r in a[len("requires="):].split(",") if r]
            else:
                errors.append(f"{md_path}:{b.line - 1}: unknown attribute '{a}' of a ```cpp block")
        last = Snippet(b, bool(MAIN.search(b.text)), requires)
        snippets.append(last)
    return snippets, errors


HARNESS = r"""
namespace {

struct DocSnippet {
  const char* where;
  int (*run)();
  std::vector<std::string> requires_backends;
  const char* expected;  // nullptr: output not checked
};

std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> out;
  std::string line;
  for (char c : s) {
    if (c == '\n') out.push_back(line), line.clear();
    else line += c;
  }
  if (!line.empty()) out.push_back(line);
  while (!out.empty() && out.back().find_first_not_of(" \t\r") == std::string::npos) out.pop_back();
  return out;
}

std::vector<std::string> words(const std::string& s) {
  std::vector<std::string> out;
  std::string w;
  for (char c : s) {
    if (c == ' ' || c == '\t' || c == '\r') {
      if (!w.empty()) out.push_back(w), w.clear();
    } else {
      w += c;
    }
  }
  if (!w.empty()) out.push_back(w);
  return out;
}

bool number(const std::string& w, double* v) {
  char* end = nullptr;
  *v = std::strtod(w.c_str(), &end);
  return !w.empty() && end == w.c_str() + w.size();
}

bool line_matches(const std::string& expected, const std::string& actual) {
  std::vector<std::string> e = words(expected), a = words(actual);
  if (e.size() != a.size()) return false;
  for (size_t i = 0; i < e.size(); ++i) {
    double x, y;
    if (number(e[i], &x) && number(a[i], &y)) {
      if (std::isnan(x) || std::isnan(y)) {
        if (std::isnan(x) != std::isnan(y)) return false;
      } else if (x != y &&
                 !(std::fabs(x - y) <= 1e-4 * std::fmax(std::fabs(x), std::fabs(y)) + 1e-9)) {
        return false;
      }
    } else if (e[i] != a[i]) {
      return false;
    }
  }
  return true;
}

// `...` in the expected lines matches any number of actual lines.
bool lines_match(const std::vector<std::string>& e, size_t i, const std::vector<std::string>& a,
                 size_t j) {
  if (i == e.size()) return j == a.size();
  if (words(e[i]) == std::vector<std::string>{"..."}) {
    for (size_t k = j; k <= a.size(); ++k)
      if (lines_match(e, i + 1, a, k)) return true;
    return false;
  }
  return j < a.size() && line_matches(e[i], a[j]) && lines_match(e, i + 1, a, j + 1);
}

bool backend_available(const std::string& name) {
  for (const kiln::DeviceInfo& d : kiln::devices())
    if (d.device.backend == name && d.available) return true;
  return false;
}

// Runs one snippet with its stdout captured into a temporary file (echoed afterwards).
bool run_one(const DocSnippet& s) {
  for (const std::string& b : s.requires_backends) {
    if (!backend_available(b)) {
      std::printf("-- %s: skipped (no available %s device)\n", s.where, b.c_str());
      return true;
    }
  }
  std::printf("-- %s\n", s.where);
  std::fflush(stdout);
  std::cout.flush();
  std::FILE* capture = std::tmpfile();
  int saved = dup(1);
  if (!capture || saved < 0 || dup2(fileno(capture), 1) < 0) {
    std::fprintf(stderr, "%s: cannot capture stdout\n", s.where);
    return false;
  }
  std::string failure;
  try {
    int rc = s.run();
    if (rc != 0) failure = "returned " + std::to_string(rc);
  } catch (const std::exception& e) {
    failure = std::string("threw: ") + e.what();
  } catch (...) {
    failure = "threw a non-std exception";
  }
  std::fflush(stdout);
  std::cout.flush();
  dup2(saved, 1);
  close(saved);
  std::string out;
  std::rewind(capture);
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, capture)) > 0;) out.append(buf, n);
  std::fclose(capture);
  std::fwrite(out.data(), 1, out.size(), stdout);
  if (failure.empty() && s.expected && !lines_match(split_lines(s.expected), 0, split_lines(out), 0))
    failure = std::string("printed something else than the document shows:\n") + s.expected;
  if (!failure.empty()) std::printf("FAILED %s: %s\n", s.where, failure.c_str());
  std::fflush(stdout);
  return failure.empty();
}

}  // namespace

int main(int argc, char** argv) {
  // --only LINE runs the snippet whose code starts at that line of the document.
  std::string only = argc == 3 && std::string(argv[1]) == "--only" ? argv[2] : "";
  int failed = 0, ran = 0;
  for (const DocSnippet& s : kSnippets) {
    std::string where = s.where;
    if (!only.empty() && where.substr(where.rfind(':') + 1) != only) continue;
    ++ran;
    if (!run_one(s)) ++failed;
  }
  std::printf("%d of %d snippets of %s failed\n", failed, ran, kDocument);
  return failed == 0 && ran > 0 ? 0 : 1;
}
"""


def closing_brace(text, open_pos):
    """The index of the brace closing the one at open_pos, skipping literals and comments."""
    depth, i, n = 0, open_pos, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            i = text.find("\n", i)
            if i < 0:
                break
        elif text.startswith("/*", i):
            i = text.find("*/", i) + 1
            if i <= 0:
                break
        elif c in "\"'":
            i += 1
            while i < n and text[i] != c:
                i += 2 if text[i] == "\\" else 1
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def as_function(text):
    """A whole program's `int main()` renamed snippet_main, with `return 0;` added before its
    closing brace (main alone may flow off its end). Line numbers are kept."""
    m = MAIN.search(text)
    brace = text.find("{", m.end())
    end = closing_brace(text, brace) if brace >= 0 else -1
    if end < 0:
        return None
    text = text[:end] + "return 0; " + text[end:]
    return MAIN.sub(lambda x: x.group(0).replace("main", "snippet_main", 1), text, count=1)


def generate(md_path, name, snippets):
    includes, seen = [], set()
    parts = []
    for n, s in enumerate(snippets):
        code = []
        for line in s.block.text.split("\n"):
            if INCLUDE.match(line):
                inc = line.strip()
                if inc not in seen:
                    seen.add(inc)
                    includes.append(inc)
                code.append("")  # keeps #line numbering right
            else:
                code.append(line)
        text = "\n".join(code)
        line_dir = f'#line {s.block.line} "{md_path}"'
        if s.whole:
            text = as_function(text)
            if text is None:
                raise SystemExit(f"{md_path}:{s.block.line}: cannot find the end of main()")
            parts.append(f"namespace doc_snippet_{n} {{\nusing namespace kiln;\n{line_dir}\n{text}\n"
                         f"}}  // namespace doc_snippet_{n}\n")
        else:
            parts.append(f"namespace doc_snippet_{n} {{\nusing namespace kiln;\nint snippet_main() {{\n"
                         f"{line_dir}\n{text}\n  return 0;\n}}\n}}  // namespace doc_snippet_{n}\n")
    table = []
    for n, s in enumerate(snippets):
        req = ", ".join(cpp_string(r) for r in s.requires)
        exp = cpp_string(s.expected + "\n") if s.expected is not None else "nullptr"
        table.append(f"    {{{cpp_string(f'{name}:{s.block.line}')}, &doc_snippet_{n}::snippet_main, "
                     f"{{{req}}},\n     {exp}}},")
    std_includes = ["<unistd.h>", "<cassert>", "<chrono>", "<cmath>", "<cstdio>", "<cstdlib>", "<exception>",
                    "<iostream>", "<string>", "<vector>"]
    head = [f"// Generated by tools/doc_snippets.py from {name}: every ```cpp block of it. Do not edit.",
            *[f"#include {h}" for h in std_includes], '#include "kiln.h"',
            *[i for i in includes if i != '#include "kiln.h"'], ""]
    body = "\n".join(parts)
    # kSnippets is defined after the harness's types, so the harness is split around it.
    harness_types, harness_main = HARNESS.split("}  // namespace\n\nint main", 1)
    return ("\n".join(head) + body + f'\n#line 1 "doc_snippets_harness.inc"\n' + harness_types +
            f"const char* kDocument = {cpp_string(name)};\n"
            f"const std::vector<DocSnippet> kSnippets = {{\n" + "\n".join(table) + "\n};\n\n"
            "}  // namespace\n\nint main" + harness_main)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("docs", nargs="+", metavar="DOC.md")
    ap.add_argument("-o", "--output", help="the generated C++ file (one DOC.md only)")
    ap.add_argument("--name", help="the document's name in messages (default: its path)")
    ap.add_argument("--list", action="store_true", help="list the snippets and exit")
    ap.add_argument("--check", action="store_true",
                    help="only check the fences of every DOC.md (no ```c++, ```text output "
                         "placement, attributes); exit 1 on a problem")
    a = ap.parse_args()
    if a.output and len(a.docs) != 1:
        ap.error("-o takes one DOC.md")
    failed = False
    for doc in a.docs:
        with open(doc, encoding="utf-8") as f:
            md = f.read()
        name = a.name or doc
        snippets, errors = collect(doc, parse_blocks(md))
        for e in errors:
            print(e, file=sys.stderr)
        failed = failed or bool(errors)
        if errors or a.check:
            continue
        if a.list:
            for s in snippets:
                kind = "program" if s.whole else "body"
                extra = (" requires " + ",".join(s.requires) if s.requires else "") + \
                        (", output checked" if s.expected is not None else "")
                print(f"{name}:{s.block.line}: {kind}{extra}")
            continue
        if not a.output:
            ap.error("-o OUT.cpp is required unless --list or --check")
        if not snippets:
            print(f"{doc}: no ```cpp blocks", file=sys.stderr)
            return 1
        with open(a.output, "w", encoding="utf-8") as f:
            f.write(generate(doc, name, snippets))
    if a.check and not failed:
        print(f"{len(a.docs)} documents: fences follow the convention")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
