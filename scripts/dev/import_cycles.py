#!/usr/bin/env python3
"""Print the import circles between the source files of each crate.

Each crate's files should stand in layers that import in one direction (issue #22). This reads
every file reachable through `mod` declarations from src/lib.rs and src/main.rs, resolves the
paths it names (`use crate::…`, `use super::…`, `crate::x::y` and `child::y` in code, names bound
by `use`) to the file that defines the item, and prints every set of files that reach each other
(a strongly connected component of the file graph), with the imports that close the loop.

Not counted, because they are no dependency of one file on another:
  - `mod x;` declarations, and any path from a module into its own submodules (a parent
    composing its parts, e.g. a router listing its handlers, is structure: the parts stand below
    it; `--with-parents` counts them too);
  - `pub use` re-exports (a facade; paths through them are followed to the defining file);
  - test code: `#[cfg(test)]` modules, inline or in their own file.

Usage: scripts/dev/import_cycles.py [--with-parents] [crate dir ...]   (default: every crates/*)
Exit status 1 when a circle is found.
"""

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def strip(src):
    """Source without comments, string and char literals (their text could look like paths)."""
    out, i, n = [], 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            i = n if j < 0 else j
        elif src.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if src.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif src.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == "r" and re.match(r'r#*"', src[i:i + 10]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = src.find('"' + m.group(1), i + len(m.group(0)))
            out.append('""')
            i = n if end < 0 else end + 1 + len(m.group(1))
        elif c == "b" and src.startswith('b"', i) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            i += 1
        elif c == '"':
            i += 1
            while i < n and src[i] != '"':
                i += 2 if src[i] == "\\" else 1
            out.append('""')
            i += 1
        elif c == "'":
            # A char literal ('a', '\n', '\u{1F600}'), not a lifetime ('a).
            m = re.match(r"'(\\u\{[0-9a-fA-F]+\}|\\.|[^\\'])'", src[i:])
            if m:
                out.append("' '")
                i += len(m.group(0))
            else:
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def block_end(src, open_brace):
    depth = 0
    for j in range(open_brace, len(src)):
        if src[j] == "{":
            depth += 1
        elif src[j] == "}":
            depth -= 1
            if depth == 0:
                return j + 1
    return len(src)


CFG_TEST = re.compile(r"#\[cfg\(\s*(all\()?\s*test\b[^\]]*\]\s*(#\[[^\]]*\]\s*)*(pub(\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])")


def drop_test_modules(src):
    """Source without `#[cfg(test)] mod x { … }`; also the names of `#[cfg(test)] mod x;` files."""
    test_files = set()
    while True:
        m = CFG_TEST.search(src)
        if not m:
            return src, test_files
        if m.group(6) == ";":
            test_files.add(m.group(5))
            src = src[: m.start()] + src[m.end():]
        else:
            src = src[: m.start()] + src[block_end(src, m.end() - 1):]


def expand_use(tree):
    """`a::{b, c::{d as e}, self}` -> [(['a','b'], 'b'), (['a','c','d'], 'e'), (['a'], 'a')]."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, s):
        parts, depth, cur = [], 0, ""
        for ch in s:
            if ch == "," and depth == 0:
                parts.append(cur)
                cur = ""
                continue
            depth += ch == "{"
            depth -= ch == "}"
            cur += ch
        parts.append(cur)
        for p in filter(None, parts):
            brace = p.find("{")
            if brace >= 0:
                head = [x for x in p[:brace].split("::") if x]
                walk(prefix + head, p[brace + 1: p.rfind("}")])
                continue
            alias = None
            if "as" in p and re.search(r"[a-zA-Z0-9_*]as[A-Za-z_]", p):
                # whitespace was removed: split `pathasname` at the last `as` after a segment
                m = re.match(r"(.*[A-Za-z0-9_])as([A-Za-z_]\w*)$", p)
                if m and "::" in m.group(1) or (m and not p.startswith("as")):
                    p, alias = m.group(1), m.group(2)
            segs = [x for x in p.split("::") if x]
            if segs and segs[-1] == "self":
                segs = segs[:-1]
            if not prefix + segs:
                continue
            full = prefix + segs
            out.append((full, alias or full[-1]))

    walk([], tree)
    return out


ITEM_DEF = r"\b(fn|struct|enum|trait|type|const|static|union|macro_rules!)\s+{name}\b"


class Module:
    def __init__(self, file, path):
        self.file, self.path = file, path  # path: ['crate', 'a', 'b']
        self.children = {}  # name -> Module (file-backed)
        self.inline = set()  # names of inline modules (same file)
        self.uses = []  # (segments, bound name, is_pub)
        self.code = ""


def module_file(parent_file, parent_is_dir_owner, name):
    base = parent_file.parent if parent_is_dir_owner else parent_file.with_suffix("")
    for cand in (base / f"{name}.rs", base / name / "mod.rs"):
        if cand.exists():
            return cand
    return None


def load(file, path, modules, mod_by_file):
    raw = file.read_text()
    src, test_files = drop_test_modules(strip(raw))
    mod = Module(file, path)
    modules[tuple(path)] = mod
    mod_by_file[file] = mod
    owner = file.name in ("lib.rs", "main.rs", "mod.rs")
    for m in re.finditer(r"((?:#\[[^\]]*\]\s*)*)(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*([;{])", src):
        attrs, name, kind = m.group(1), m.group(2), m.group(3)
        if kind == "{":
            mod.inline.add(name)
            continue
        if name in test_files:
            continue
        pm = re.search(r'#\[path\s*=\s*""\]', attrs)
        if pm:  # a #[path] module: the literal was stripped, read it from the raw text
            lit = re.search(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+' + name + r"\b", raw)
            child = (file.parent / lit.group(1)) if lit else None
        else:
            child = module_file(file, owner, name)
        if child and child.exists():
            mod.children[name] = load(child, path + [name], modules, mod_by_file)
    code = src
    for m in re.finditer(r"\b(pub(?:\([^)]*\))?\s+)?use\s+([^;]+);", src):
        for segs, bound in expand_use(m.group(2)):
            if segs[0] == "::":
                continue
            mod.uses.append((segs, bound, bool(m.group(1)) and "(" not in (m.group(1) or "")))
    mod.code = re.sub(r"\b(pub(?:\([^)]*\))?\s+)?use\s+[^;]+;", "", code)
    return mod


class Crate:
    def __init__(self, root_file):
        self.modules, self.by_file = {}, {}
        self.root = load(root_file, ["crate"], self.modules, self.by_file)

    def absolute(self, mod, segs):
        """Module-relative segments -> absolute ['crate', …], or None for other crates / std."""
        head = segs[0]
        if head == "crate":
            return segs
        if head == "self":
            return mod.path + segs[1:]
        if head == "super":
            base = list(mod.path)
            while segs and segs[0] == "super":
                base, segs = base[:-1], segs[1:]
            return base + segs
        if head in mod.children or head in mod.inline:
            return mod.path + segs
        for useg, bound, _ in mod.uses:
            if bound == head and useg[-1] != "*":
                target = self.absolute(mod, useg)
                return None if target is None else target + segs[1:]
        return None

    def resolve(self, segs, seen=None):
        """Absolute path -> the file defining what it names (following `pub use`)."""
        seen = seen or set()
        key = tuple(segs)
        if key in seen:
            return None
        seen.add(key)
        mod = self.root
        i = 1
        while i < len(segs):
            name = segs[i]
            if name in mod.children:
                mod = mod.children[name]
                i += 1
                continue
            if name in mod.inline or name == "*":
                return mod.file
            if re.search(ITEM_DEF.format(name=re.escape(name)), mod.code):
                return mod.file
            for useg, bound, is_pub in mod.uses:
                if bound == name:
                    target = self.absolute(mod, useg)
                    if target is None:
                        return None  # another crate's item, re-exported
                    return self.resolve(target + segs[i + 1:], seen) or mod.file
            for useg, bound, is_pub in mod.uses:
                if useg[-1] == "*":
                    target = self.absolute(mod, useg[:-1])
                    if target:
                        got = self.resolve(target + segs[i:], seen)
                        if got and got != self.modules.get(tuple(target), mod).file:
                            return got
            return mod.file
        return mod.file

    def is_descendant(self, child_file, parent_file):
        child, parent = self.by_file[child_file].path, self.by_file[parent_file].path
        return len(child) > len(parent) and child[: len(parent)] == parent

    def edges(self, with_parents=False):
        """{(from_file, to_file): [what names it]}"""
        out = {}
        for mod in self.by_file.values():
            refs = []
            for segs, bound, is_pub in mod.uses:
                if is_pub:
                    continue  # a re-export; followed when resolving, not a use of its own
                refs.append(segs)
            heads = set(mod.children) | {b for s, b, _ in mod.uses if s[-1] != "*"} | {"crate", "super", "self"}
            for m in re.finditer(r"(?<![\w:])((?:\w+::)+\w+|(?:\w+::)+\{)", mod.code):
                segs = [s for s in m.group(1).split("::") if s and s != "{"]
                if segs and segs[0] in heads and len(segs) > 1:
                    refs.append(segs)
            for segs in refs:
                target = self.absolute(mod, segs)
                if target is None:
                    continue
                to = self.resolve(target)
                if to and to != mod.file and (with_parents or not self.is_descendant(to, mod.file)):
                    out.setdefault((mod.file, to), set()).add("::".join(segs))
        return out


def cycles(edges):
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index, low, stack, on, comps, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                comps.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return comps


def main(argv):
    with_parents = "--with-parents" in argv
    argv = [a for a in argv if a != "--with-parents"]
    dirs = [Path(a).resolve() for a in argv] or sorted((ROOT / "crates").iterdir())
    found = 0
    for crate_dir in dirs:
        for root_name in ("lib.rs", "main.rs"):
            root_file = crate_dir / "src" / root_name
            if not root_file.exists():
                continue
            crate = Crate(root_file)
            edges = crate.edges(with_parents)
            for comp in cycles(edges):
                found += 1
                members = set(comp)
                rel = lambda p: str(p.relative_to(crate_dir / "src"))
                print(f"{crate_dir.name} ({root_name}): {' <-> '.join(rel(p) for p in comp)}")
                for (a, b), names in sorted(edges.items()):
                    if a in members and b in members:
                        print(f"    {rel(a)} -> {rel(b)}: {', '.join(sorted(names)[:4])}{' …' if len(names) > 4 else ''}")
    if not found:
        print("no import circles")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
