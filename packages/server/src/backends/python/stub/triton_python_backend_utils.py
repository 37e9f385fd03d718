"""The `triton_python_backend_utils` module of Batchwise's Python backend.

Model files written for Triton's python backend import it as `pb_utils`. This is Batchwise's own
implementation of that API, behaving as Triton's python_backend documents it. What needs the
server (calls to other models, decoupled responses, logs, metrics) goes through `_runtime`, which
the stub sets when it serves a model; without it, those raise (calls, responses) or fall back to
stderr (logs).
"""

import enum
import json
import sys
import threading

import numpy as np

import _bw_dlpack as _dlpack
import _bw_wire as _wire

# The stub's runtime (serve mode), set by stub.py; None otherwise.
_runtime = None
# The folder of the model file (Triton: the version folder), set by stub.py.
_model_dir = None

TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2

# PreferredMemory's memory types (Triton: kGPU, kCPU).
TRITONSERVER_MEMORY_GPU = 0
TRITONSERVER_MEMORY_CPU = 1

TRITON_STRING_TO_NUMPY = {
    "TYPE_BOOL": bool,
    "TYPE_UINT8": np.uint8,
    "TYPE_UINT16": np.uint16,
    "TYPE_UINT32": np.uint32,
    "TYPE_UINT64": np.uint64,
    "TYPE_INT8": np.int8,
    "TYPE_INT16": np.int16,
    "TYPE_INT32": np.int32,
    "TYPE_INT64": np.int64,
    "TYPE_FP16": np.float16,
    "TYPE_FP32": np.float32,
    "TYPE_FP64": np.float64,
    "TYPE_STRING": np.object_,
}

_NUMPY_OF_TRITON = {
    1: np.bool_,
    2: np.uint8,
    3: np.uint16,
    4: np.uint32,
    5: np.uint64,
    6: np.int8,
    7: np.int16,
    8: np.int32,
    9: np.int64,
    10: np.float16,
    11: np.float32,
    12: np.float64,
    13: np.object_,
}


class TritonModelException(Exception):
    """Raised by this module's API; models raise it too."""


class TritonError:
    """An error for one response: a message and one of the codes below."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    # The codes' names on the wire.
    _NAMES = {
        0: "UNKNOWN",
        1: "INTERNAL",
        2: "NOT_FOUND",
        3: "INVALID_ARG",
        4: "UNAVAILABLE",
        5: "UNSUPPORTED",
        6: "ALREADY_EXISTS",
        7: "CANCELLED",
    }
    _CODES = {name: code for code, name in _NAMES.items()}

    __slots__ = ("_message", "_code")

    def __init__(self, message, code=INTERNAL):
        if message is None or code is None:
            raise TypeError("TritonError(message, code): neither may be None")
        self._message = str(message)
        self._code = int(code)

    def message(self):
        return self._message

    def code(self):
        return self._code

    def _wire(self):
        return {"message": self._message, "code": self._NAMES.get(self._code, "INTERNAL")}

    @classmethod
    def _from_wire(cls, message, code_name):
        return cls(message, cls._CODES.get(code_name, cls.INTERNAL))

    def __repr__(self):
        return "TritonError({!r}, {})".format(self._message, self._NAMES.get(self._code, self._code))


class PreferredMemory:
    """Accepted for compatibility: the outputs of calls to other models arrive in CPU memory."""

    def __init__(self, preferred_memory_type, preferred_device_id=0):
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


class InferenceTrace:
    """Accepted for compatibility; calls join the trace of the execute that makes them."""

    def get_context(self):
        return None


# ---------------------------------------------------------------------------------------------
# Tensors


# __dlpack_device__ of host memory: (kDLCPU, 0).
_HOST = (_dlpack.KDL_CPU, 0)


def _require_dlpack():
    if not hasattr(np.ndarray, "__dlpack__"):
        raise TritonModelException("DLPack needs numpy 1.22 or later, this is numpy " + np.__version__)


class Tensor:
    """A named tensor: a numpy array and its KServe datatype, or, made by from_dlpack of GPU memory,
    that memory (is_cpu() False; it is copied to the host when it leaves the process)."""

    __slots__ = ("_name", "_datatype", "_array", "_gpu")

    def __init__(self, name, data):
        if not isinstance(name, str):
            raise TypeError("Tensor name must be a str, got " + str(type(name)))
        if name == "":
            raise TritonModelException("Tensor name cannot be an empty string.")
        array = data if isinstance(data, np.ndarray) else np.asarray(data)
        datatype = _wire.datatype_of(array.dtype)
        if datatype is None:
            if array.dtype.byteorder not in ("=", "|") and array.dtype.newbyteorder("=") in _wire.DATATYPE_OF:
                array = array.astype(array.dtype.newbyteorder("="))
                datatype = _wire.DATATYPE_OF[array.dtype]
            else:
                raise TritonModelException("NumPy dtype is not supported.")
        if not array.flags.c_contiguous:
            array = np.ascontiguousarray(array)
        self._name = name
        self._datatype = datatype
        self._array = array
        self._gpu = None

    @classmethod
    def _of(cls, name, datatype, array):
        """A tensor from checked parts (received tensors): no validation, no copy."""
        tensor = cls.__new__(cls)
        tensor._name = name
        tensor._datatype = datatype
        tensor._array = array
        tensor._gpu = None
        return tensor

    def name(self):
        return self._name

    def as_numpy(self):
        if self._gpu is not None:
            raise TritonModelException("Tensor is stored in GPU and cannot be converted to NumPy.")
        if self._datatype == "BF16":
            raise TritonModelException(
                "Tensor dtype is BF16 and cannot be converted to NumPy. Use "
                "to_dlpack() and from_dlpack() instead."
            )
        return self._array

    def triton_dtype(self):
        return _wire.TRITON_ENUM_OF[self._datatype]

    def shape(self):
        if self._gpu is not None:
            return list(self._gpu.shape)
        return list(self._array.shape)

    def is_cpu(self):
        return self._gpu is None

    def to_dlpack(self):
        """A DLPack capsule sharing this tensor's memory (host or GPU); it keeps the tensor alive."""
        if self._datatype == "BYTES":
            raise TritonModelException("DLPack does not have support for string tensors.")
        _require_dlpack()
        gpu = self._gpu
        if gpu is not None:
            return _dlpack.export(gpu.ptr, gpu.shape, self._datatype, gpu.device, self)
        array = self._array
        return _dlpack.export(array.__array_interface__["data"][0], array.shape, self._datatype, _HOST, self)

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        # As in Triton, `stream` needs no waiting: no work is pending on a tensor's memory here.
        device = self.__dlpack_device__()
        if dl_device is not None and tuple(dl_device) != device:
            raise BufferError("Tensor '{}' is on DLPack device {}, not {}".format(self._name, device, tuple(dl_device)))
        if copy:
            if self._gpu is not None:
                raise BufferError("Tensor '{}' is in GPU memory: __dlpack__(copy=True) is not supported".format(self._name))
            return Tensor._of(self._name, self._datatype, self._array.copy()).to_dlpack()
        return self.to_dlpack()

    def __dlpack_device__(self):
        gpu = self._gpu
        return _HOST if gpu is None else gpu.device

    @staticmethod
    def from_dlpack(name, tensor):
        """A Tensor sharing the memory of a DLPack capsule or of an object with `__dlpack__` and
        `__dlpack_device__` (zero-copy): host memory as a numpy array, GPU memory as it is."""
        if name == "":
            raise TritonModelException("Tensor name cannot be an empty string.")
        _require_dlpack()
        try:
            imported = _dlpack.take(tensor)
        except _dlpack.DLPackError as error:
            raise TritonModelException(str(error)) from None
        result = Tensor.__new__(Tensor)
        result._name = name
        result._datatype = imported.datatype
        if imported.device[0] == _dlpack.KDL_CUDA:
            result._array = None
            result._gpu = imported
        else:
            dtype = _wire.NUMPY_OF[imported.datatype]
            result._array = _dlpack.view(imported.ptr, imported.shape, dtype, imported)
            result._gpu = None
        return result

    def _host(self):
        """The array whose bytes go on the wire: the tensor's own, or its GPU memory copied to the host."""
        gpu = self._gpu
        if gpu is None:
            return self._array
        try:
            raw = _dlpack.copy_to_host(gpu, "Tensor '{}'".format(self._name))
        except _dlpack.DLPackError as error:
            raise TritonModelException(str(error)) from None
        return raw.view(_wire.NUMPY_OF[self._datatype]).reshape(gpu.shape)

    def __repr__(self):
        where = "" if self._gpu is None else ", GPU {}".format(self._gpu.device[1])
        return "Tensor({!r}, {}, {}{})".format(self._name, self._datatype, self.shape(), where)


def serialize_byte_tensor(input_tensor):
    """The KServe BYTES layout of an np.object_ / np.bytes_ array (bytes), () when empty, None
    for other dtypes."""
    if input_tensor.size == 0:
        return ()
    if input_tensor.dtype == np.object_ or input_tensor.dtype.type == np.bytes_:
        return _wire.serialize_bytes(input_tensor)
    return None


def deserialize_bytes_tensor(encoded_tensor):
    """A 1-D np.object_ array of the bytes elements in a KServe BYTES buffer."""
    return _wire.deserialize_bytes(encoded_tensor)


def triton_to_numpy_type(data_type):
    return _NUMPY_OF_TRITON.get(data_type)


def numpy_to_triton_type(data_type):
    try:
        dtype = np.dtype(data_type)
    except TypeError:
        return None
    if dtype.kind == "U":
        return None
    datatype = _wire.datatype_of(dtype)
    return None if datatype is None else _wire.TRITON_ENUM_OF[datatype]


def triton_string_to_numpy(triton_type_string):
    return TRITON_STRING_TO_NUMPY[triton_type_string]


# ---------------------------------------------------------------------------------------------
# Requests and responses


def _parameters_dict(parameters):
    """Request / response parameters checked as Triton does: str keys, bool/int/str values."""
    if parameters is None:
        return {}
    if isinstance(parameters, str):
        parameters = json.loads(parameters) if parameters else {}
    if not isinstance(parameters, dict):
        raise TritonModelException("Expect dict, got " + str(type(parameters)))
    for key, value in parameters.items():
        if not isinstance(key, str):
            raise TritonModelException(
                "Expect parameters keys to have type str, found type " + str(type(key))
            )
        if not isinstance(value, (bool, int, str)):
            raise TritonModelException(
                "Expect parameters values to have type bool/int/str, found type " + str(type(value))
            )
    return parameters


def _require_runtime():
    runtime = _runtime
    if runtime is None or not runtime.serving:
        raise TritonModelException("BLS is only supported during the 'execute' function.")
    return runtime


class _DetachedSender:
    """The sender of a request this model made itself: it answers nobody."""

    def send(self, response=None, flags=0):
        raise TritonModelException(
            "Unable to send response. Response sender has no reference to the decoupled state of the model."
        )

    def is_cancelled(self):
        return False


class InferenceRequest:
    """A request: one this model received (execute's argument), or one it makes to another model."""

    def __init__(
        self,
        request_id="",
        correlation_id=0,
        inputs=None,
        requested_output_names=None,
        model_name=None,
        model_version=-1,
        flags=0,
        timeout=0,
        preferred_memory=None,
        trace=None,
        parameters=None,
    ):
        missing = [
            argument
            for argument, value in (
                ("inputs", inputs),
                ("requested_output_names", requested_output_names),
                ("model_name", model_name),
            )
            if value is None
        ]
        if missing:
            raise TypeError("InferenceRequest() missing required argument(s): " + ", ".join(missing))
        if isinstance(model_name, bytes):
            model_name = model_name.decode("utf-8")
        if isinstance(correlation_id, (bool, float)) or not isinstance(correlation_id, (int, str)):
            raise TritonModelException("Correlation ID must be integer or string")
        inputs = list(inputs)
        for tensor in inputs:
            if not isinstance(tensor, Tensor):
                raise TritonModelException(
                    "Input tensor for request with id '{}' and model name '{}' should not be empty.".format(
                        request_id, model_name
                    )
                )
        names = []
        for output_name in requested_output_names:
            if output_name == "":
                raise TritonModelException(
                    "Requested output name for request with id '{}' and model name '{}' should not be empty.".format(
                        request_id, model_name
                    )
                )
            if output_name not in names:
                names.append(output_name)
        self._parameters = _parameters_dict(parameters)
        self._request_id = str(request_id)
        self._correlation_id = correlation_id
        self._inputs = inputs
        self._output_names = names
        self._model_name = str(model_name)
        self._model_version = int(model_version)
        self._flags = int(flags)
        self._timeout = int(timeout)
        self._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        self._state = None

    @classmethod
    def _received(cls, state, message, inputs, model_name, model_version):
        """A request of an execute: `message` is its wire form, `state` the runtime's record of it."""
        request = cls.__new__(cls)
        request._parameters = message["parameters"]
        request._request_id = message["id"]
        request._correlation_id = message["correlationId"]
        request._inputs = inputs
        request._output_names = message["outputs"]
        request._model_name = model_name
        request._model_version = model_version
        request._flags = message["flags"]
        request._timeout = message["timeoutUs"]
        request._release_flags = TRITONSERVER_REQUEST_RELEASE_ALL
        request._state = state
        return request

    def inputs(self):
        return self._inputs

    def request_id(self):
        return self._request_id

    def correlation_id(self):
        return self._correlation_id

    def flags(self):
        return self._flags

    def set_flags(self, flags):
        self._flags = int(flags)

    def timeout(self):
        return self._timeout

    def parameters(self):
        """The parameters as JSON text."""
        return json.dumps(self._parameters)

    def trace(self):
        return InferenceTrace()

    def requested_output_names(self):
        return set(self._output_names)

    def is_cancelled(self):
        state = self._state
        return state is not None and state.cancelled

    def get_response_sender(self):
        state = self._state
        if state is None:
            return _DetachedSender()
        return state.sender()

    def set_release_flags(self, flags):
        self._release_flags = int(flags)

    def exec(self, decoupled=False):
        """Runs this request on its model: an InferenceResponse (errors in it, never raised), or
        with decoupled=True an iterator of the model's responses, the last one final."""
        return _require_runtime().call(self, bool(decoupled))

    def async_exec(self, decoupled=False):
        """exec() for a running asyncio loop: sends the request now, returns an awaitable of
        what exec() returns."""
        return _require_runtime().async_call(self, bool(decoupled))


class InferenceResponse:
    """The response to a request: output tensors, or an error."""

    __slots__ = ("_tensors", "_error", "_parameters")

    def __init__(self, output_tensors=None, error=None, parameters=None):
        tensors = [] if output_tensors is None else list(output_tensors)
        for tensor in tensors:
            if not isinstance(tensor, Tensor):
                raise TypeError("output_tensors must be pb_utils.Tensor objects, got " + str(type(tensor)))
        if error is not None and not isinstance(error, TritonError):
            raise TypeError("error must be a pb_utils.TritonError, got " + str(type(error)))
        self._tensors = tensors
        self._error = error
        self._parameters = None if parameters is None else _parameters_dict(parameters)

    def output_tensors(self):
        return self._tensors

    def _on_host(self, wanted):
        """This response with its GPU tensors among `wanted` copied to the host (the same one if none
        are): raises TritonModelException, before anything is sent, when one cannot be copied."""
        if not any(t._gpu is not None and t._name in wanted for t in self._tensors):
            return self
        tensors = [
            Tensor._of(t._name, t._datatype, t._host()) if t._gpu is not None and t._name in wanted else t
            for t in self._tensors
        ]
        response = InferenceResponse(tensors, self._error)
        response._parameters = self._parameters
        return response

    def has_error(self):
        return self._error is not None

    def error(self):
        return self._error

    def parameters(self):
        """The parameters as JSON text."""
        return json.dumps(self._parameters or {})


def get_input_tensor_by_name(inference_request, name):
    for tensor in inference_request.inputs():
        if tensor.name() == name:
            return tensor
    return None


def get_output_tensor_by_name(inference_response, name):
    for tensor in inference_response.output_tensors():
        if tensor.name() == name:
            return tensor
    return None


def get_input_config_by_name(model_config, name):
    for properties in model_config.get("input", ()):
        if properties["name"] == name:
            return properties
    return None


def get_output_config_by_name(model_config, name):
    for properties in model_config.get("output", ()):
        if properties["name"] == name:
            return properties
    return None


def using_decoupled_model_transaction_policy(model_config):
    policy = model_config.get("model_transaction_policy")
    if policy is not None:
        return bool(policy.get("decoupled", False))
    return False


def get_model_dir():
    """The folder of the model file (Triton: the version folder)."""
    return _model_dir


def load_model(model_name, config="", files=None):
    raise TritonModelException("The model loading API is not supported by Batchwise's Python backend.")


def unload_model(model_name, unload_dependents=False):
    raise TritonModelException("The model loading API is not supported by Batchwise's Python backend.")


def is_model_ready(model_name, model_version=""):
    raise TritonModelException("The model loading API is not supported by Batchwise's Python backend.")


# ---------------------------------------------------------------------------------------------
# Auto-complete


class ModelConfig:
    """The configuration auto_complete_config reads and completes (max_batch_size, dynamic
    batching, inputs, outputs, transaction policy), with Triton's checks."""

    def __init__(self, model_config):
        if isinstance(model_config, (str, bytes)):
            self._model_config = json.loads(model_config)
        else:
            self._model_config = json.loads(json.dumps(model_config))

    def as_dict(self):
        return self._model_config

    def _name(self):
        return str(self._model_config.get("name", ""))

    def set_max_batch_size(self, max_batch_size):
        configured = self._model_config.get("max_batch_size", 0)
        if configured > max_batch_size:
            raise ValueError(
                "configuration specified max_batch_size {}, but in auto-complete-config function "
                "for model '{}' specified max_batch_size {}".format(configured, self._name(), max_batch_size)
            )
        self._model_config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self):
        for scheduler in ("sequence_batching", "ensemble_scheduling"):
            if scheduler in self._model_config:
                raise ValueError(
                    "Configuration specified scheduling_choice as '{}', but auto-complete-config "
                    "function for model '{}' tries to set scheduling_choice as 'dynamic_batching'".format(
                        scheduler, self._name()
                    )
                )
        self._model_config.setdefault("dynamic_batching", {})

    def _add_tensor(self, kind, tensor, allowed):
        """add_input / add_output: `kind` is 'input' or 'output'."""
        for key in tensor:
            if key not in allowed:
                raise ValueError(
                    "{} '{}' in auto-complete-config function for model '{}' contains property other "
                    "than {}.".format(kind, tensor.get("name"), self._name(), _quoted_list(allowed))
                )
        if "name" not in tensor:
            raise ValueError(
                "{} in auto-complete-config function for model '{}' is missing 'name' property.".format(
                    kind, self._name()
                )
            )
        for key in ("data_type", "dims"):
            if key not in tensor:
                raise ValueError(
                    "{} '{}' in auto-complete-config function for model '{}' is missing '{}' "
                    "property.".format(kind, tensor["name"], self._name(), key)
                )
        entries = self._model_config.setdefault(kind, [])
        for current in entries:
            if current.get("name") != tensor["name"]:
                continue
            current_type = current.get("data_type", "TYPE_INVALID")
            if current_type != "TYPE_INVALID" and current_type != tensor["data_type"]:
                raise ValueError(
                    "unable to load model '{}', configuration expects datatype {} for {} '{}', "
                    "model provides {}".format(self._name(), current_type, kind, tensor["name"], tensor["data_type"])
                )
            if current.get("dims") and current["dims"] != tensor["dims"]:
                raise ValueError(
                    "model '{}', tensor '{}': the model expects dims {} but the model configuration "
                    "specifies dims {}".format(self._name(), tensor["name"], tensor["dims"], current["dims"])
                )
            if "optional" in current and "optional" in tensor and current["optional"] != tensor["optional"]:
                raise ValueError(
                    "model '{}', tensor '{}': the model expects optional {} but the model "
                    "configuration specifies optional {}".format(
                        self._name(), tensor["name"], tensor["optional"], current["optional"]
                    )
                )
            current["data_type"] = tensor["data_type"]
            current["dims"] = tensor["dims"]
            if "optional" in tensor:
                current["optional"] = tensor["optional"]
            return
        entries.append(tensor)

    def add_input(self, input):
        self._add_tensor("input", input, ("name", "data_type", "dims", "optional"))

    def add_output(self, output):
        self._add_tensor("output", output, ("name", "data_type", "dims"))

    def set_model_transaction_policy(self, transaction_policy_dict):
        for key in transaction_policy_dict:
            if key != "decoupled":
                raise ValueError(
                    "model transaction property in auto-complete-config function for model '{}' "
                    "contains property other than 'decoupled'.".format(self._name())
                )
        policy = self._model_config.setdefault("model_transaction_policy", {})
        if "decoupled" in transaction_policy_dict:
            wanted = transaction_policy_dict["decoupled"]
            if "decoupled" in policy and policy["decoupled"] != wanted:
                raise ValueError(
                    "trying to change decoupled property in auto-complete-config for model '{}', "
                    "which is already set to '{}'.".format(self._name(), policy["decoupled"])
                )
            policy["decoupled"] = wanted


def _quoted_list(names):
    quoted = ["'" + name + "'" for name in names]
    if len(quoted) == 1:
        return quoted[0]
    return ", ".join(quoted[:-1]) + " and " + quoted[-1]


# ---------------------------------------------------------------------------------------------
# Logging


class LogLevel(enum.IntEnum):
    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3


_LEVEL_NAMES = {LogLevel.INFO: "info", LogLevel.WARNING: "warn", LogLevel.ERROR: "error", LogLevel.VERBOSE: "verbose"}


def _log(message, level, depth):
    """Logs `message`, naming the file and line `depth` frames up (the model's call)."""
    frame = sys._getframe(depth)
    filename = frame.f_code.co_filename
    line = frame.f_lineno
    name = _LEVEL_NAMES.get(LogLevel(level), "info")
    runtime = _runtime
    if runtime is not None:
        runtime.log(name, str(message), filename, line)
    else:
        sys.stderr.write("{} {}:{}] {}\n".format(name[0].upper(), filename, line, message))


class Logger:
    """Logs into the server's log, at a level, with the caller's file and line."""

    LogLevel = LogLevel
    INFO = LogLevel.INFO
    WARNING = LogLevel.WARNING
    ERROR = LogLevel.ERROR
    VERBOSE = LogLevel.VERBOSE

    @staticmethod
    def log(message, level=LogLevel.INFO):
        _log(message, level, 2)

    @staticmethod
    def log_info(message):
        _log(message, LogLevel.INFO, 2)

    @staticmethod
    def log_warn(message):
        _log(message, LogLevel.WARNING, 2)

    @staticmethod
    def log_error(message):
        _log(message, LogLevel.ERROR, 2)

    @staticmethod
    def log_verbose(message):
        _log(message, LogLevel.VERBOSE, 2)


# ---------------------------------------------------------------------------------------------
# Custom metrics


class MetricKind(enum.IntEnum):
    COUNTER = 0
    GAUGE = 1
    HISTOGRAM = 2


_KIND_NAMES = {MetricKind.COUNTER: "counter", MetricKind.GAUGE: "gauge", MetricKind.HISTOGRAM: "histogram"}
# Families declared by this process: name -> (description, kind).
_families = {}
# Values of the metrics (family, sorted labels) -> value; metrics with the same labels share one.
_metric_values = {}
_metrics_lock = threading.Lock()


def _post(message):
    runtime = _runtime
    if runtime is not None:
        runtime.post(message)


class MetricFamily:
    """A custom metric family (COUNTER, GAUGE or HISTOGRAM); Metric(labels) makes its metrics."""

    COUNTER = MetricKind.COUNTER
    GAUGE = MetricKind.GAUGE
    HISTOGRAM = MetricKind.HISTOGRAM

    def __init__(self, name, description, kind):
        if name is None or description is None or kind is None:
            raise TypeError("MetricFamily(name, description, kind): none may be None")
        try:
            kind = MetricKind(kind)
        except ValueError:
            raise TritonModelException("Unknown metric kind") from None
        self._name = str(name)
        self._description = str(description)
        self._kind = kind
        with _metrics_lock:
            declared = _families.get(self._name)
            if declared is not None:
                if declared != (self._description, kind):
                    raise TritonModelException(
                        "Error when creating MetricFamily: a metric family named '{}' already exists "
                        "with a different description or kind".format(self._name)
                    )
                return
            _families[self._name] = (self._description, kind)
        _post(
            {"t": "metric-family", "name": self._name, "description": self._description, "kind": _KIND_NAMES[kind]}
        )

    def Metric(self, labels=None, buckets=None):
        return Metric(self, labels, buckets)


class Metric:
    """One metric of a family, named by its labels."""

    def __init__(self, family, labels=None, buckets=None):
        if labels is None:
            labels = {}
        if not isinstance(labels, dict):
            raise TritonModelException("Failed to create metric. Labels must be a dictionary.")
        if buckets is not None:
            if not isinstance(buckets, (list, tuple)):
                raise TritonModelException("Failed to create metric. Buckets must be a list.")
            if family._kind != MetricKind.HISTOGRAM:
                raise TritonModelException("Failed to create metric. Unexpected buckets found.")
            buckets = [float(bucket) for bucket in buckets]
        elif family._kind == MetricKind.HISTOGRAM:
            raise TritonModelException("Failed to create metric. Missing required buckets.")
        self._family = family
        self._labels = {str(key): str(value) for key, value in labels.items()}
        self._buckets = buckets
        self._key = (family._name, tuple(sorted(self._labels.items())))
        with _metrics_lock:
            _metric_values.setdefault(self._key, 0.0)

    def _send(self, op, value):
        message = {"t": "metric", "family": self._family._name, "labels": self._labels, "op": op, "value": value}
        if self._buckets is not None:
            message["buckets"] = self._buckets
        _post(message)

    def increment(self, value):
        value = float(value)
        kind = self._family._kind
        if kind == MetricKind.HISTOGRAM:
            raise TritonModelException("Failed to increment metric value: histogram metrics cannot be incremented")
        if kind == MetricKind.COUNTER and value < 0:
            raise TritonModelException(
                "Failed to increment metric value: counter metrics cannot be incremented by a negative value"
            )
        with _metrics_lock:
            _metric_values[self._key] += value
        self._send("increment", value)

    def set(self, value):
        value = float(value)
        if self._family._kind != MetricKind.GAUGE:
            raise TritonModelException(
                "Failed to set metric value: only gauge metrics can be set, this one is a "
                + _KIND_NAMES[self._family._kind]
            )
        with _metrics_lock:
            _metric_values[self._key] = value
        self._send("set", value)

    def observe(self, value):
        value = float(value)
        if self._family._kind != MetricKind.HISTOGRAM:
            raise TritonModelException(
                "Failed to observe metric value: only histogram metrics can observe, this one is a "
                + _KIND_NAMES[self._family._kind]
            )
        with _metrics_lock:
            _metric_values[self._key] += value
        self._send("observe", value)

    def value(self):
        if self._family._kind == MetricKind.HISTOGRAM:
            raise TritonModelException("Failed to get metric value: histogram metrics have no single value")
        with _metrics_lock:
            return _metric_values[self._key]
