"""framejit.explain's result object."""


class ExplainOutput:
    """What explain(fn)(*args) saw: graphs, graph breaks with reasons, guards, op count."""

    def __init__(self, raw):
        self.result = raw["result"]
        self.graphs = list(raw["graphs"])
        self.break_reasons = list(raw["break_reasons"])
        self.guards = list(raw["guards"])
        self.op_count = raw["op_count"]

    @property
    def graph_count(self):
        return len(self.graphs)

    @property
    def graph_break_count(self):
        return len(self.break_reasons)

    def __str__(self):
        lines = [
            f"Graph count: {self.graph_count}",
            f"Graph break count: {self.graph_break_count}",
            f"Op count: {self.op_count}",
        ]
        if self.break_reasons:
            lines.append("Break reasons:")
            lines += [f"  {i + 1}. {r}" for i, r in enumerate(self.break_reasons)]
        for i, g in enumerate(self.graphs):
            lines.append(f"Graph {i + 1}:")
            lines += ["  " + line for line in g.rstrip().splitlines()]
        if self.guards:
            lines.append("Guards:")
            lines += [f"  {g}" for g in self.guards]
        return "\n".join(lines)

    __repr__ = __str__
