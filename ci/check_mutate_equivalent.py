#!/usr/bin/env python3
"""Every entry of ci/mutate_equivalent.txt still names a line of the code, with an operator that applies to it.

ci/mutate.sh skips a mutant when (file, stripped line, operator) matches an entry. An edit to such a line leaves the
entry matching nothing: the mutant is then run again (harmless) but the file keeps a reason about code that no longer
exists, and a typo in a new entry never excluded anything. This check (ctest Gate_MutateEquivalentEntriesMatchTheCode,
label L0) fails on either, naming the entry. Usage: check_mutate_equivalent.py ROOT
"""
import os
import sys

# Each operator of mutate.py and the token it needs in a line to apply at all.
NEEDS = {
    "lt->le": "<", "le->lt": "<=", "gt->ge": ">", "ge->gt": ">=", "eq->ne": "==", "ne->eq": "!=",
    "and->or": "&&", "or->and": "||", "plus->minus": "+", "minus->plus": "-", "mul->div": "*",
    "transpose-drop": ".transpose()", "sqrt-drop": "sqrt", "exp-drop": "exp", "abs-drop": "abs",
    "zero->one": "0", "eps-bigger": "e-", "idx+1": "[", "max->min": "max", "min->max": "min", "const-2": "2",
}


def entries(root):
    """(where, parts) for each entry line of ROOT/ci/mutate_equivalent.txt: parts = [file, line, operator, why, ...]
    stripped, or None when the line lacks one of the four (ci/mutate.sh reads the file through this too)."""
    path = os.path.join(root, "ci", "mutate_equivalent.txt")
    for no, line in enumerate(open(path, encoding="utf-8"), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = [p.strip() for p in line.rstrip("\n").split(" | ")]
        yield f"{path}:{no}", (parts if len(parts) >= 4 and parts[3] else None)


def problems(root):
    out = []
    for where, parts in entries(root):
        if parts is None:
            out.append(f"{where}: needs 'file | line | operator | why'")
            continue
        rel, text, op = parts[:3]
        src = os.path.join(root, rel)
        if not os.path.isfile(src):
            out.append(f"{where}: no file {rel}")
            continue
        if text not in {l.strip() for l in open(src, encoding="utf-8")}:
            out.append(f"{where}: {rel} has no line '{text}' (edited since the entry was written?)")
        if op not in NEEDS:
            out.append(f"{where}: unknown operator '{op}' (mutate.py's: {', '.join(sorted(NEEDS))})")
        elif NEEDS[op] not in text:
            out.append(f"{where}: operator '{op}' cannot apply to '{text}' (no '{NEEDS[op]}')")
    return out


if __name__ == "__main__":
    found = problems(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    for p in found:
        print(p, file=sys.stderr)
    sys.exit(1 if found else 0)
