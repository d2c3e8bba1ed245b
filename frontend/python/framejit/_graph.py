"""The Python view of a captured graph, as custom backends receive it.

    def my_backend(graph, example_inputs):
        print(graph.code)
        for node in graph.nodes:
            node.op, node.name, node.target, node.args, node.kwargs, node.meta
        return some_callable  # takes the graph inputs, returns a tuple/list of outputs
"""


class Ref:
    """A reference to node number `index` while a graph is being built from C++."""

    __slots__ = ("index",)

    def __init__(self, index):
        self.index = index


class Node:
    """One node: op is "placeholder", "call_function" or "output"."""

    __slots__ = ("op", "name", "target", "args", "kwargs", "meta")

    def __init__(self, op, name, target, args, kwargs, meta):
        self.op = op
        self.name = name
        self.target = target
        self.args = args
        self.kwargs = kwargs
        self.meta = meta

    def __repr__(self):
        return f"<Node {self.op} {self.name} {self.target}>"


class Graph:
    """nodes: list of Node in topological order; code: the printed graph."""

    def __init__(self, nodes, code):
        self.nodes = nodes
        self.code = code

    @property
    def placeholders(self):
        return [n for n in self.nodes if n.op == "placeholder"]

    @property
    def output(self):
        return self.nodes[-1]

    def __str__(self):
        return self.code


def _resolve(value, nodes):
    if isinstance(value, Ref):
        return nodes[value.index]
    if isinstance(value, tuple):
        return tuple(_resolve(v, nodes) for v in value)
    if isinstance(value, list):
        return [_resolve(v, nodes) for v in value]
    if isinstance(value, dict):
        return {k: _resolve(v, nodes) for k, v in value.items()}
    if isinstance(value, slice):
        return slice(_resolve(value.start, nodes), _resolve(value.stop, nodes), _resolve(value.step, nodes))
    return value


def _from_raw(raw, code):
    nodes = [Node(op, name, target or None, (), {}, meta) for op, name, target, _, _, meta in raw]
    for node, (_, _, _, args, kwargs, _) in zip(nodes, raw):
        node.args = _resolve(args, nodes)
        node.kwargs = _resolve(kwargs, nodes)
    return Graph(nodes, code)
