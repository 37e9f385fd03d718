"""Runs one of Triton's example client scripts, unchanged, against a server on other ports.

Usage: run_unchanged.py HTTP_HOST:PORT GRPC_HOST:PORT SCRIPT [ARGS...]

Triton's python_backend example clients hardcode Triton's default addresses, "localhost:8000"
(tritonclient.http) and "localhost:8001" (tritonclient.grpc). The tests start each server on
ephemeral ports (test files run side by side, and 8000/8001 may be taken), so instead of editing
the scripts or binding the default ports, this wrapper changes only the address: it wraps the
constructors of tritonclient.http.InferenceServerClient and tritonclient.grpc.InferenceServerClient
so that exactly those two default URLs become the given ones (any other URL is left alone), prints
each rewrite to stderr, then runs the script as `python3 SCRIPT` would (as __main__, with its
folder first on sys.path and sys.argv = [SCRIPT, ARGS...]). The script's own code, requests and
checks are Triton's, byte for byte; its exit status is the wrapper's.
"""

import functools
import os
import runpy
import sys

import tritonclient.grpc
import tritonclient.http


def redirect(cls, default, target):
    original = cls.__init__

    @functools.wraps(original)
    def __init__(self, *args, **kwargs):
        if args and args[0] == default:
            args = (target,) + args[1:]
            print(f"run_unchanged: {cls.__module__} url {default} -> {target}", file=sys.stderr)
        elif kwargs.get("url") == default:
            kwargs["url"] = target
            print(f"run_unchanged: {cls.__module__} url {default} -> {target}", file=sys.stderr)
        original(self, *args, **kwargs)

    cls.__init__ = __init__


def main():
    if len(sys.argv) < 4:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    http_url, grpc_url, script = sys.argv[1], sys.argv[2], os.path.abspath(sys.argv[3])
    redirect(tritonclient.http.InferenceServerClient, "localhost:8000", http_url)
    redirect(tritonclient.grpc.InferenceServerClient, "localhost:8001", grpc_url)
    sys.argv = [script] + sys.argv[4:]
    sys.path[0] = os.path.dirname(script)
    runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
