"""python -m framejit [options] script.py [args...] | -m module [args...]

Runs a script (or module) as __main__ with framejit installed as the frame evaluator, so its hot
functions are captured and compiled. Output, exit status and exceptions are the script's own.
With FRAMEJIT_LOGS naming breaks or recompiles, a summary of them is printed on exit.
"""

import argparse
import os
import runpy
import sys

import framejit


def _parser():
    p = argparse.ArgumentParser(
        prog="python -m framejit",
        description="Run a Python script with framejit installed as the frame evaluator.",
        usage="python -m framejit [--backend {jit,eager}] [--fullgraph] [--mode {default,reduce-overhead}]\n"
              "                          (script.py | -m module) [args ...]",
    )
    p.add_argument("--backend", default="jit", choices=["jit", "eager"], help="code generator (default: jit)")
    p.add_argument("--fullgraph", action="store_true", help="fail instead of breaking a graph")
    p.add_argument("--mode", default=None, choices=["default", "reduce-overhead"],
                   help="reduce-overhead: replay each run's GPU work as one CUDA graph")
    p.add_argument("-m", dest="module", help="run a library module as a script, like python -m")
    p.add_argument("target", nargs="?", help="the script to run")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments for the script")
    return p


def _print_summary():
    text = framejit._C._event_summary()
    if text:
        sys.stderr.write("[framejit] summary\n" + text)


def run_script(path, args):
    """Run `path` as __main__ with sys.argv = [path, *args] in this (already framejit-enabled)
    interpreter; print the summary FRAMEJIT_LOGS asks for. Returns the exit status: 0, the code
    of a SystemExit, or 1 after printing an uncaught exception (framejit-run uses this)."""
    import traceback

    sys.argv = [path, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        runpy.run_path(path, run_name="__main__")
        return 0
    except SystemExit as e:
        if e.code is None:
            return 0
        if isinstance(e.code, int):
            return e.code
        print(e.code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    finally:
        sys.stdout.flush()
        _print_summary()


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    # Everything after the script (or after -m module) belongs to it, options included.
    ours, rest = [], list(argv)
    while rest and rest[0].startswith("-") and rest[0] != "-m":
        ours.append(rest.pop(0))
        if ours[-1] in ("--backend", "--mode") and rest:
            ours.append(rest.pop(0))
    if rest[:1] == ["-m"]:
        if len(rest) < 2:
            _parser().error("-m needs a module name")
        opts = _parser().parse_args(ours)
        module, args = rest[1], rest[2:]
        target = None
    else:
        opts = _parser().parse_args(ours + rest[:1])
        if not opts.target:
            _parser().error("a script (or -m module) is required")
        target, args, module = opts.target, rest[1:], None

    framejit.install(opts.backend, fullgraph=opts.fullgraph, mode=opts.mode)
    try:
        if module is not None:
            sys.argv = [module, *args]
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        else:
            sys.argv = [target, *args]
            sys.path[0] = os.path.dirname(os.path.abspath(target))
            runpy.run_path(target, run_name="__main__")
    finally:
        framejit.uninstall()
        _print_summary()


if __name__ == "__main__":
    main()
