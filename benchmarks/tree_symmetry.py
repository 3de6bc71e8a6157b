"""How many nodes NCCL's double binary tree leaves alike: the classes of the coarsest
equitable partition of the nodes (colour refinement over both trees' parent and child
edges), against the node count. Nodes in one class see alike neighbours in both trees, to
any depth; only such nodes could share a simulation exactly (an orbit of the symmetric path
lies inside one class). A ring's nodes form one class; the trees' form one class per node.

    python benchmarks/tree_symmetry.py [--nodes 16 128 1024 2048]
"""

from __future__ import annotations

import argparse

from collsim.nccl.layout import Tree, double_tree


def classes(trees: tuple[Tree, ...], n: int) -> int:
    """The number of classes colour refinement ends with, from every node alike."""
    colour = [0] * n
    count = 1
    while True:
        signatures = [(colour[r], *((None if t.parent[r] is None else colour[t.parent[r]],
                                     tuple(sorted(colour[c] for c in t.children[r])))
                                    for t in trees)) for r in range(n)]
        names: dict[tuple, int] = {}
        colour = [names.setdefault(s, len(names)) for s in signatures]
        if len(names) == count:
            return count
        count = len(names)


def ring(n: int) -> Tree:
    """A ring over the nodes, as a tree would be read: each node's predecessor and successor
    (the root's predecessor is the last node, so that every node has one)."""
    parent = tuple((r - 1) % n for r in range(n))
    children = tuple(((r + 1) % n,) for r in range(n))
    return Tree(0, parent, children)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, nargs="+", default=[16, 128, 1024, 2048])
    args = parser.parse_args()
    print(f"{'nodes':>6} {'ring classes':>13} {'double tree classes':>20}")
    for n in args.nodes:
        print(f"{n:>6} {classes((ring(n),), n):>13} {classes(double_tree(n), n):>20}")


if __name__ == "__main__":
    main()
