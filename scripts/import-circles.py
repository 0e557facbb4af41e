#!/usr/bin/env python3
"""Import circles between the files of a Rust crate (issue 27 item 4).

    scripts/import-circles.py SRC_DIR [--max N] [--edges]

Reads every `.rs` file under SRC_DIR as one module (`a/b.rs` and `a/b/mod.rs` are
`a::b`), finds the files each one names — `use` trees and `crate::`/`self::`/`super::`
paths outside comments and `#[cfg(test)] mod tests { .. }` blocks, and paths from a
child module (`pub use child::Item`) — and prints every strongly connected set of more than one file.
Exits 1 when a set has more than N files (default 4: a type split over a module and two
or three children is allowed; a circle through the layers is not). `--edges` prints the
edges inside the largest set, which is where to cut.

A text scan, not the compiler's resolver: a path written through a re-export counts as
naming the re-exporting file (which is what makes a circle through `mod.rs` visible).
"""

import argparse
import os
import re
import sys


def modules(root):
    """Module path (`a::b`) -> file, for every `.rs` file under `root`."""
    found = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".rs"):
                continue
            path = os.path.join(dirpath, name)
            rel = os.path.relpath(path, root)[:-3]
            if rel == "main":
                continue
            parts = rel.split("/")
            if parts[-1] in ("mod", "lib"):
                parts = parts[:-1]
            found["::".join(parts)] = path
    return found


def code(text):
    """The text without comment lines, `pub(in path)` and the inline test module."""
    lines = [line for line in text.split("\n") if not line.strip().startswith("//")]
    text = re.sub(r"pub\(in [A-Za-z_:]+\)", "pub", "\n".join(lines))
    cut = text.find("#[cfg(test)]\nmod tests {")
    return text[:cut] if cut >= 0 else text


def use_paths(tree):
    """`a::{b, c::{d, e}}` -> [[a, b], [a, c, d], [a, c, e]]."""
    out = []

    def walk(prefix, text):
        text = text.strip()
        if not text:
            return
        brace = text.find("{")
        if brace < 0:
            segs = text.split(" as ")[0].strip().split("::")
            out.append(prefix + [s for s in segs if s])
            return
        head = [s for s in text[:brace].split("::") if s]
        body = text[brace + 1 : text.rfind("}")]
        depth, item = 0, ""
        for ch in body:
            depth += ch == "{"
            depth -= ch == "}"
            if ch == "," and depth == 0:
                walk(prefix + head, item)
                item = ""
            else:
                item += ch
        walk(prefix + head, item)

    walk([], tree)
    return out


def edges(mods):
    def resolve(segs):
        for i in range(len(segs), 0, -1):
            name = "::".join(segs[:i])
            if name in mods:
                return name
        return None

    graph = {m: set() for m in mods}
    for mod, path in mods.items():
        with open(path, encoding="utf-8") as f:
            text = code(f.read())
        here = mod.split("::") if mod else []

        def absolute(segs):
            if not segs:
                return None
            if segs[0] == "crate":
                return segs[1:]
            if segs[0] in ("self", "super"):
                base = list(here)
                while segs and segs[0] in ("self", "super"):
                    if segs[0] == "super":
                        base = base[:-1]
                    segs = segs[1:]
                return base + segs
            # A path from a child module (`pub use driver::Client;` in a `mod.rs`).
            if "::".join(here + segs[:1]) in mods:
                return here + segs
            return None

        paths = []
        for m in re.finditer(r"\buse\s+([^;]+);", text):
            paths += use_paths(m.group(1))
        for m in re.finditer(
            r"(?<![A-Za-z0-9_:])((?:crate|super|self)(?:::[A-Za-z_][A-Za-z0-9_]*)+)"
            r"(?![A-Za-z0-9_:])",
            text,
        ):
            paths.append(m.group(1).split("::"))
        for segs in paths:
            target = absolute(segs)
            target = resolve(target) if target else None
            if target is not None and target != mod:
                graph[mod].add(target)
    return graph


def circles(graph):
    """Tarjan's strongly connected components with more than one module."""
    sys.setrecursionlimit(10000)
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

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
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out, key=len, reverse=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("src")
    parser.add_argument("--max", type=int, default=4)
    parser.add_argument("--edges", action="store_true")
    args = parser.parse_args()
    mods = modules(args.src)
    graph = edges(mods)
    found = circles(graph)
    for comp in found:
        print(f"{len(comp)} files: {', '.join(comp)}")
    if args.edges and found:
        inside = set(found[0])
        for v in found[0]:
            print(f"  {v} -> {', '.join(sorted(graph[v] & inside))}")
    too_big = [c for c in found if len(c) > args.max]
    if too_big:
        print(
            f"{args.src}: an import circle of {len(too_big[0])} files (at most {args.max} "
            "allowed): cut it where a lower module names a higher one (--edges)",
            file=sys.stderr,
        )
        return 1
    print(f"{args.src}: {len(mods)} files, no import circle of more than {args.max}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
