"""Batchwise's Python backend stub: one process per model instance, started as `python3 -u stub.py`.

It talks to the server over fd 3 (../protocol.ts is the contract). The first message, `init`,
says what to do: `auto-complete` runs the model class's auto_complete_config and answers
`completed`; `serve` loads the model, answers `ready`, then runs executes until `close`.
"""

import importlib
import importlib.util
import os
import signal
import sys
import traceback

STUB_DIR = os.path.dirname(os.path.abspath(__file__))



def refuse_without_numpy(error):
    """numpy is missing: the load fails saying so (framed by hand, as the wire module needs numpy)."""
    import json
    import struct

    message = "numpy cannot be imported by {} ({}): install it (apt-get install python3-numpy), or name an " \
        "environment that has it with the model's EXECUTION_ENV_PATH".format(sys.executable, error)
    header = json.dumps({"t": "load-failed", "message": message}).encode()
    os.write(3, struct.pack("<II", len(header), 0) + header)
    os._exit(1)


try:
    import numpy  # noqa: F401
except ImportError as missing:
    refuse_without_numpy(missing)

# This folder's modules are imported now, while it is first on sys.path: model folders, which
# come first later, cannot shadow them (not even with a copy of triton_python_backend_utils).
import _bw_wire as wire  # noqa: E402
import triton_python_backend_utils as pb_utils  # noqa: E402
from _bw_runtime import Runtime, error_text  # noqa: E402


def arrange_path(paths):
    """The model's folders first (version folder, model folder), then this folder, then the rest."""
    rest = [entry for entry in sys.path if entry and os.path.abspath(entry) != STUB_DIR]
    sys.path[:] = list(paths) + [STUB_DIR] + rest


def import_model(path):
    """Imports the model file. As in Triton, a model/1/model.py is the module `1.model` (so
    relative imports reach its neighbours) when its folder is importable as a package."""
    path = os.path.abspath(path)
    folder = os.path.dirname(path)
    stem = os.path.splitext(os.path.basename(path))[0]
    package_name = os.path.basename(folder)
    name = stem
    package = None
    try:
        package = importlib.import_module(package_name)
        if folder in [os.path.abspath(entry) for entry in getattr(package, "__path__", ())]:
            name = package_name + "." + stem
        else:
            package = None
    except Exception:
        package = None
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError("cannot load a Python module from " + path)
    module = importlib.util.module_from_spec(spec)
    # Registered before it runs: dataclasses and pickle look modules up by name.
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    if package is not None:
        setattr(package, stem, module)
    return module


def auto_complete(conn, init, model_class):
    config = pb_utils.ModelConfig(init.get("config") or {})
    completer = getattr(model_class, "auto_complete_config", None)
    if completer is not None:
        config = completer(config)
    if not isinstance(config, pb_utils.ModelConfig):
        raise pb_utils.TritonModelException(
            "auto_complete_config function in model '{}' must return a valid pb.ModelConfig object.".format(
                init.get("args", {}).get("model_name", "")
            )
        )
    conn.send({"t": "completed", "config": config.as_dict()})


def main():
    # As Triton's stub does, SIGINT and SIGTERM are the server's to act on: Ctrl-C in its terminal
    # or a stop sent to its whole process group (systemd, `kill -- -PGID`) reach the stub too, and the
    # server's shutdown closes it. A server that is gone closes the socket, and the reader thread
    # ends the stub (_bw_runtime.py); the server ends one that hangs with SIGKILL.
    signal.signal(signal.SIGINT, lambda signum, frame: None)
    signal.signal(signal.SIGTERM, lambda signum, frame: None)
    conn = wire.Connection(3)
    frame = conn.read()
    if frame is None:
        wire.exit_now(1)
    init = frame[0]
    try:
        if init.get("t") != "init":
            raise RuntimeError("expected an init message, got " + repr(init.get("t")))
        arrange_path(init.get("paths") or [])
        pb_utils._model_dir = os.path.dirname(os.path.abspath(init["modelFile"]))
        if init.get("mode") == "auto-complete":
            module = import_model(init["modelFile"])
            auto_complete(conn, init, module.TritonPythonModel)
            wire.exit_now(0)

        runtime = Runtime(conn, init)
        pb_utils._runtime = runtime
        # Reading starts now: should the server go away while the model loads, the stub goes too.
        runtime.start_reader()
        module = import_model(init["modelFile"])
        model = module.TritonPythonModel()
        if not callable(getattr(model, "execute", None)):
            raise AttributeError("TritonPythonModel in %s has no execute(self, requests) method" % init["modelFile"])
        initialize = getattr(model, "initialize", None)
        if initialize is not None:
            initialize(dict(init["args"]))
    except BaseException as error:
        traceback.print_exc()
        try:
            conn.send({"t": "load-failed", "message": error_text(error)})
        finally:
            wire.exit_now(1)
    conn.send({"t": "ready"})
    runtime.serve(model)


if __name__ == "__main__":
    main()
