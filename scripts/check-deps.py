#!/usr/bin/env python3
"""Fails when Cargo's dependency graph breaks the workspace's one-way rules (DESIGN.md, "Shape").

Normal (non-dev, non-build) dependencies are followed transitively, so a rule cannot be
side-stepped through a third crate:
- an NF crate never depends on another NF crate;
- `sbi` depends on no NF crate and not on `store`;
- `diameter` does not depend on `sbi`;
- `bench` (the kit, a pure client) depends on no NF crate and not on `store`;
- the shared crates an NF stands on (`store`, `nrf-client`, `nf`) depend on no NF crate;
- `dd-client` (the copy envelope and the copier every NF installs) depends on no NF crate and
  not on `store`;
- `policy` knows neither SBI nor Diameter nor a store.

Usage: scripts/check-deps.py [--metadata FILE | --self-test]  (default: runs `cargo metadata --offline`).
"""
import json
import subprocess
import sys

NF_CRATES = {"fivecore-nrf", "fivecore-udr", "fivecore-bsf", "fivecore-pcf", "fivecore-dd"}
RULES = [
    # (crate, forbidden dependencies, why)
    ("fivecore-sbi", NF_CRATES | {"fivecore-store"}, "sbi is below every NF and knows no store"),
    ("fivecore-diameter", {"fivecore-sbi"}, "diameter and sbi are independent stacks"),
    ("fivecore-bench", NF_CRATES | {"fivecore-store"}, "the kit is a client over the wire"),
    ("fivecore-store", NF_CRATES | {"fivecore-sbi"}, "the store is below every NF"),
    ("fivecore-nrf-client", NF_CRATES, "every NF uses nrf-client"),
    ("fivecore-nf", NF_CRATES, "every NF stands on the skeleton"),
    ("fivecore-dd-client", NF_CRATES | {"fivecore-store"},
     "every NF feeds the Data Director through dd-client"),
    ("fivecore-console", NF_CRATES | {"fivecore-store"},
     "the console changes nothing itself: it calls the NFs' own APIs over the wire"),
    ("fivecore-policy", NF_CRATES | {"fivecore-sbi", "fivecore-diameter", "fivecore-store"},
     "the policy engine sees requests as data: no SBI, no Diameter, no store"),
]


def normal_deps(metadata):
    """Package name -> set of names of its normal dependencies inside the resolved graph."""
    names = {p["id"]: p["name"] for p in metadata["packages"]}
    graph = {}
    for node in metadata["resolve"]["nodes"]:
        deps = set()
        for d in node.get("deps", []):
            if any(k.get("kind") is None for k in d.get("dep_kinds", [])):
                deps.add(names[d["pkg"]])
        graph.setdefault(names[node["id"]], set()).update(deps)
    return graph


def closure(graph, start):
    seen, todo = set(), list(graph.get(start, ()))
    while todo:
        n = todo.pop()
        if n not in seen:
            seen.add(n)
            todo.extend(graph.get(n, ()))
    return seen


def violations(metadata):
    graph = normal_deps(metadata)
    members = {p["name"] for p in metadata["packages"] if p["id"] in metadata["workspace_members"]}
    out = []
    for nf in sorted(NF_CRATES & members):
        for dep in sorted(closure(graph, nf) & (NF_CRATES - {nf})):
            out.append(f"{nf} -> {dep}: an NF crate never depends on another NF crate")
    for crate, forbidden, why in RULES:
        if crate in members:
            for dep in sorted(closure(graph, crate) & forbidden):
                out.append(f"{crate} -> {dep}: {why}")
    return out


def self_test():
    """The rules catch what they must (direct and transitive) and pass what is allowed."""
    def meta(edges, dev=()):
        pkgs = sorted({a for a, _ in edges} | {b for _, b in edges} | {a for a, _ in dev}
                      | {b for _, b in dev})
        nodes = []
        for p in pkgs:
            deps = [{"pkg": b, "dep_kinds": [{"kind": None}]} for a, b in edges if a == p]
            deps += [{"pkg": b, "dep_kinds": [{"kind": "dev"}]} for a, b in dev if a == p]
            nodes.append({"id": p, "deps": deps})
        return {"packages": [{"id": p, "name": p} for p in pkgs], "workspace_members": pkgs,
                "resolve": {"nodes": nodes}}
    ok = meta([("fivecore-bsf", "fivecore-sbi"), ("fivecore-bsf", "fivecore-store"),
               ("fivecore-bench", "fivecore-sbi"), ("fivecore", "fivecore-bsf")],
              dev=[("fivecore-bench", "fivecore-bsf"), ("fivecore-udr", "fivecore-nrf")])
    assert violations(ok) == [], violations(ok)
    assert len(violations(meta([("fivecore-udr", "fivecore-nrf")]))) == 1
    # Transitive: bench -> helper -> store.
    bad = violations(meta([("fivecore-bench", "helper"), ("helper", "fivecore-store")]))
    assert bad == ["fivecore-bench -> fivecore-store: the kit is a client over the wire"], bad
    assert len(violations(meta([("fivecore-sbi", "fivecore-store")]))) == 1
    assert len(violations(meta([("fivecore-diameter", "fivecore-sbi")]))) == 1
    assert len(violations(meta([("fivecore-dd-client", "fivecore-dd")]))) == 1
    print("dependency rules self-test: ok")


def main():
    if sys.argv[1:] == ["--self-test"]:
        self_test()
        return 0
    if len(sys.argv) == 3 and sys.argv[1] == "--metadata":
        with open(sys.argv[2]) as f:
            metadata = json.load(f)
    else:
        raw = subprocess.run(
            ["cargo", "metadata", "--format-version", "1", "--locked", "--offline"],
            check=True, capture_output=True, text=True,
        ).stdout
        metadata = json.loads(raw)
    bad = violations(metadata)
    for line in bad:
        print(f"dependency rule broken: {line}", file=sys.stderr)
    if bad:
        return 1
    print("dependency rules: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())
