"""framejit.explain's result object."""


class GraphBreakInfo:
    """One graph break: why (kind, reason, the exception CPython raises there) and where (the root
    frame's instruction offset, the innermost file:line, the root frame's stack and bound locals at
    the start of that instruction, each described as text), and what happened next: `resumed` when
    the graph before it ran and a resume function went on after it, else `no_resume` says why the
    whole frame ran in CPython."""

    __slots__ = ("kind", "reason", "exc_type", "filename", "lineno", "offset", "stack", "locals", "resumed",
                 "no_resume")

    def __init__(self, raw):
        self.kind = raw["kind"]  # "unsupported", "eager_error", "missing_attribute", ...
        self.reason = raw["reason"]
        self.exc_type = raw["exc_type"]  # an exception type, or None
        self.filename = raw["filename"]
        self.lineno = raw["lineno"]
        self.offset = raw["offset"]  # byte offset in the root code object, as dis counts
        self.stack = list(raw["stack"])  # bottom first
        self.locals = dict(raw["locals"])  # name -> description, in slot order
        self.resumed = raw["resumed"]
        self.no_resume = raw["no_resume"]

    def __repr__(self):
        where = f"{self.filename}:{self.lineno}" if self.filename else "?"
        return f"GraphBreakInfo({self.kind} at offset {self.offset}, {where}: {self.reason})"


class ExplainOutput:
    """What explain(fn)(*args) saw: graphs, graph breaks with reasons (`breaks` has them as
    GraphBreakInfo), guards, op count."""

    def __init__(self, raw):
        self.result = raw["result"]
        self.graphs = list(raw["graphs"])
        self.break_reasons = list(raw["break_reasons"])
        self.breaks = [GraphBreakInfo(b) for b in raw["breaks"]]
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
            for i, b in enumerate(self.breaks):
                lines.append(f"  {i + 1}. {b.reason}")
                if b.no_resume:
                    lines.append(f"     (the whole frame ran in CPython: {b.no_resume})")
        for i, g in enumerate(self.graphs):
            lines.append(f"Graph {i + 1}:")
            lines += ["  " + line for line in g.rstrip().splitlines()]
        if self.guards:
            lines.append("Guards:")
            lines += [f"  {g}" for g in self.guards]
        return "\n".join(lines)

    __repr__ = __str__
