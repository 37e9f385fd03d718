"""Runs one of Triton's qa test scripts, unchanged, against a test server on other ports.

Usage: run_qa.py HTTP_HOST:PORT GRPC_HOST:PORT METRICS_HOST:PORT -m unittest [ARGS...]
       run_qa.py HTTP_HOST:PORT GRPC_HOST:PORT METRICS_HOST:PORT SCRIPT [ARGS...]

The qa scripts of Triton's server repository (qa/L0_*) reach the server at Triton's default
addresses: "localhost:8000" and "localhost:8001" in tritonclient's constructors (as the python_backend
examples do, see run_unchanged.py, whose rewrite this reuses), and also raw URLs given to `requests`:
"http://localhost:8000/..." (the generate endpoint) and "http://localhost:8002/metrics" (Prometheus
metrics). The tests serve each repository on ephemeral ports, so this wrapper changes only those
addresses, and prints each rewrite to stderr:
- tritonclient.http/.grpc InferenceServerClient (and their .aio variants, where importable):
  exactly "localhost:8000" / "localhost:8001" become HTTP_HOST:PORT / GRPC_HOST:PORT;
- requests (every call goes through requests.Session.request): a URL starting with
  "http://localhost:8000/" or "http://localhost:8002/" gets the HTTP or the METRICS address instead.
Then it runs what `python3 -m unittest ARGS` (or `python3 SCRIPT ARGS`) would, in the current
directory, which the caller sets to the script's folder as the qa test.sh files do (the scripts put
"../common" or "../../common" on sys.path relative to it).

QA_PLACEHOLDER_MODULES (comma-separated, optional): modules that the script imports at its top but
that only tests not run here use (python_test.py imports ml_dtypes for test_bf16 alone). Where such a
module is not installed, a placeholder module of that name is put in sys.modules, said on stderr, so
that the import line passes: its attributes are named stand-ins (test_util.py reads ml_dtypes.bfloat16
at its top) that nothing can use, so a test that used the module would fail, not pass.
"""

import functools
import os
import runpy
import sys
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from run_unchanged import redirect  # noqa: E402


def redirect_requests(prefixes):
    try:
        import requests
    except ImportError:
        return
    original = requests.Session.request

    @functools.wraps(original)
    def request(self, method, url, *args, **kwargs):
        if isinstance(url, str):
            for default, target in prefixes:
                if url.startswith(default):
                    url = target + url[len(default) :]
                    break
        return original(self, method, url, *args, **kwargs)

    requests.Session.request = request


class _Placeholder:
    """What a placeholder module's attribute is (qa/common/test_util.py reads ml_dtypes.bfloat16 at its
    top): a named stand-in that numpy does not take as a dtype, so any real use of it fails."""

    def __init__(self, name):
        self._name = name

    def __repr__(self):
        return "<placeholder {} (module not installed)>".format(self._name)


def _placeholder_attribute(module, attribute):
    if attribute.startswith("__"):
        raise AttributeError(attribute)
    return _Placeholder(module + "." + attribute)


def placeholders():
    for name in filter(None, os.environ.get("QA_PLACEHOLDER_MODULES", "").split(",")):
        try:
            __import__(name)
        except ImportError:
            module = types.ModuleType(name)
            module.__getattr__ = functools.partial(_placeholder_attribute, name)
            sys.modules[name] = module
            print(f"run_qa: {name} is not installed: an empty placeholder module stands in", file=sys.stderr)


def main():
    if len(sys.argv) < 5:
        print(__doc__, file=sys.stderr)
        sys.exit(2)
    http_url, grpc_url, metrics_url = sys.argv[1:4]
    rest = sys.argv[4:]
    import tritonclient.grpc
    import tritonclient.http

    redirect(tritonclient.http.InferenceServerClient, "localhost:8000", http_url)
    redirect(tritonclient.grpc.InferenceServerClient, "localhost:8001", grpc_url)
    try:
        import tritonclient.grpc.aio

        redirect(tritonclient.grpc.aio.InferenceServerClient, "localhost:8001", grpc_url)
    except ImportError:
        pass
    try:
        import tritonclient.http.aio

        redirect(tritonclient.http.aio.InferenceServerClient, "localhost:8000", http_url)
    except ImportError:
        pass
    redirect_requests(
        [
            ("http://localhost:8000/", f"http://{http_url}/"),
            ("http://localhost:8002/", f"http://{metrics_url}/"),
        ]
    )
    placeholders()
    if rest[0] == "-m":
        if len(rest) < 2:
            print(__doc__, file=sys.stderr)
            sys.exit(2)
        sys.argv = [rest[1]] + rest[2:]
        sys.path[0] = os.getcwd()
        runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
    else:
        script = os.path.abspath(rest[0])
        sys.argv = [script] + rest[1:]
        sys.path[0] = os.path.dirname(script)
        runpy.run_path(script, run_name="__main__")


if __name__ == "__main__":
    main()
