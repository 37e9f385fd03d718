"""The serving side of the stub: shared-memory regions, the reader thread, executes, decoupled
responses and calls to other models (BLS). See ../protocol.ts for the messages.

Threads: the reader thread owns reads of the socket; it hands `execute` and `close` to the main
thread (which runs the model) and settles everything else itself (acks, ends, call results).
Any thread may write: Connection.send serialises frames.
"""

import asyncio
import concurrent.futures
import itertools
import mmap
import os
import queue
import sys
import threading
import traceback
from time import perf_counter_ns

import _bw_wire as wire
import triton_python_backend_utils as pb_utils

MAX_UNSENT_RESPONSES = 8
ACK_EVERY = MAX_UNSENT_RESPONSES // 2

_FINAL = pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL
_Tensor = pb_utils.Tensor
_InferenceResponse = pb_utils.InferenceResponse
_TritonModelException = pb_utils.TritonModelException


class _Refusal(Exception):
    """A broken rule of the execute contract; its message is the whole error text."""


class _Region:
    """A shared-memory file mapped whole. Mapped again when it grows; an earlier mapping is
    dropped, never closed, since numpy views of it may still exist."""

    def __init__(self, path):
        self.fd = os.open(path, os.O_RDWR)
        self.size = 0
        self.mm = None
        self.remap(os.fstat(self.fd).st_size)

    def remap(self, size):
        self.mm = mmap.mmap(self.fd, size) if size else None
        self.size = size


class _RequestState:
    """What the runtime knows of one received request: its end, its sender's progress."""

    __slots__ = (
        "runtime",
        "key",
        "outputs",
        "cancelled",
        "end_message",
        "closed",
        "unacked",
        "sent",
        "response",
        "executing",
        "awaited",
        "announced",
        "cond",
        "_sender",
    )

    def __init__(self, runtime, key, outputs, decoupled):
        self.runtime = runtime
        self.key = key
        # The outputs the request asked for: other outputs are dropped, as Triton does.
        self.outputs = outputs
        self.cancelled = False
        self.end_message = None
        self.closed = False
        self.unacked = 0
        self.sent = 0
        self.response = None
        self.executing = True
        # A non-decoupled request whose execute returned None before its sender sent: its response
        # goes on its own once sent (Triton's default-mode sender may answer after execute returns).
        self.awaited = False
        self.announced = False
        # Senders of a decoupled model wait on it for acknowledgements.
        self.cond = threading.Condition() if decoupled else None
        self._sender = None

    def sender(self):
        if self._sender is None:
            self._sender = InferenceResponseSender(self)
        return self._sender


class InferenceResponseSender:
    """request.get_response_sender(): sends a request's responses, the last with the final flag."""

    __slots__ = ("_state",)

    def __init__(self, state):
        self._state = state

    def send(self, response=None, flags=0):
        if flags != _FINAL and flags != 0:
            raise _TritonModelException("Unable to send response. Unsupported flag provided.")
        if flags == 0 and response is None:
            raise _TritonModelException(
                "Inference Response object must be provided when the response flags is set to zero."
            )
        if response is not None and not isinstance(response, _InferenceResponse):
            raise TypeError("response must be a pb_utils.InferenceResponse, got " + str(type(response)))
        if response is not None:
            # GPU outputs go to the host now, so that a copy that cannot be made fails this call.
            response = response._on_host(self._state.outputs)
        self._state.runtime.respond(self._state, response, flags == _FINAL)

    def is_cancelled(self):
        return self._state.cancelled


class _Stream:
    """A streamed call's side the reader thread fills: responses queued for the iterator."""

    def __init__(self, runtime, call):
        self.runtime = runtime
        self.call = call
        self.queue = queue.SimpleQueue()
        # Settled with the first response (exec(decoupled=True) returns then, as Triton's does).
        self.first = concurrent.futures.Future()
        self.lock = threading.Lock()
        self.abandoned = False
        self.pushed = 0
        self.acked = 0

    def push(self, response, final):
        with self.lock:
            if not final:
                self.pushed += 1
            abandoned = self.abandoned
        if abandoned:
            # Nobody takes them: acknowledge so the called model is not held back.
            if not final:
                self._ack_owed(ACK_EVERY)
        else:
            self.queue.put((response, final))
        if not self.first.done():
            self.first.set_result(None)

    def ack(self, count):
        with self.lock:
            self.acked += count
        self.runtime.conn.send({"t": "call-ack", "call": self.call, "count": count})

    def _ack_owed(self, at_least):
        with self.lock:
            owed = self.pushed - self.acked
            if owed < at_least:
                return
            self.acked += owed
        self.runtime.conn.send({"t": "call-ack", "call": self.call, "count": owed})

    def abandon(self):
        with self.lock:
            self.abandoned = True
        self._ack_owed(1)


class ResponseIterator:
    """exec(decoupled=True): the called model's responses; the last one carries the final flag
    (an empty response when the final flag came alone). Iterating again after the end replays
    them, as Triton's iterator does."""

    def __init__(self, stream):
        self._stream = stream
        self._responses = []
        self._index = 0
        self._finished = False
        self._taken = 0

    def __iter__(self):
        if self._finished and self._index >= len(self._responses):
            self._index = 0
        return self

    def __next__(self):
        if self._finished:
            if self._index < len(self._responses):
                response = self._responses[self._index]
                self._index += 1
                return response
            raise StopIteration("Iteration is done for the responses.")
        response, final = self._stream.queue.get()
        self._responses.append(response)
        if final:
            self._finished = True
            self._index = len(self._responses)
        else:
            self._taken += 1
            if self._taken == ACK_EVERY:
                self._taken = 0
                self._stream.ack(ACK_EVERY)
        return response

    def cancel(self):
        if not self._finished:
            self._stream.runtime.conn.send({"t": "call-cancel", "call": self._stream.call})

    def __del__(self):
        if not self._finished:
            self._stream.abandon()


async def _after_first(stream, iterator):
    await asyncio.wrap_future(stream.first)
    return iterator


def error_text(error):
    """`<ExceptionType>: <message>`, as a traceback's last line says it."""
    text = str(error)
    return "{}: {}".format(type(error).__name__, text) if text else type(error).__name__


class Runtime:
    """One model instance's server side, in serve mode."""

    def __init__(self, conn, init):
        self.conn = conn
        self.decoupled = bool(init.get("decoupled"))
        self.model_file = init.get("modelFile", "")
        self.model_name = init.get("args", {}).get("model_name", "")
        self.instance_name = init.get("args", {}).get("model_instance_name", "")
        self.model = None
        # False outside execute's reach (initialize, finalize): calls are refused then.
        self.serving = False
        self.current_execute = None
        self.requests = {}
        self.calls = {}
        self._inbox = queue.SimpleQueue()
        self._call_ids = itertools.count(1)
        self._lock = threading.Lock()
        self._loop = None
        self._background = set()
        self._in = _Region(init["inPath"])
        self._out = _Region(init["outPath"])
        self._growth = int(init.get("shmGrowthBytes") or (1 << 20))

    # -- reader thread ----------------------------------------------------------------------

    def start_reader(self):
        threading.Thread(target=self._read_loop, name="stub-reader", daemon=True).start()

    def _read_loop(self):
        read = self.conn.read
        while True:
            try:
                frame = read()
            except OSError:
                frame = None
            if frame is None:
                # The server is gone.
                wire.exit_now(0)
            try:
                self._dispatch(*frame)
            except Exception:
                sys.stderr.write("stub: could not handle a message from the server:\n")
                traceback.print_exc()

    def _dispatch(self, message, data):
        kind = message["t"]
        if kind == "execute":
            # Registered here, before the main thread takes the batch, so an early `end` finds them.
            states = []
            for request in message["requests"]:
                state = _RequestState(self, request["key"], request["outputs"], self.decoupled)
                self.requests[state.key] = state
                states.append(state)
            self._inbox.put((message, states))
        elif kind == "ack":
            state = self.requests.get(message["key"])
            if state is not None and state.cond is not None:
                with state.cond:
                    state.unacked -= message["count"]
                    state.cond.notify_all()
        elif kind == "end":
            state = self.requests.pop(message["key"], None)
            if state is not None:
                state.end_message = message.get("message") or "the request has ended"
                state.cancelled = True
                if state.cond is not None:
                    with state.cond:
                        state.cond.notify_all()
        elif kind == "call-result":
            future = self.calls.pop(message["call"], None)
            if future is not None:
                future.set_result(_InferenceResponse(self._tensors(message["outputs"], data), parameters=message.get("parameters")))
        elif kind == "call-response":
            final = bool(message.get("final"))
            stream = self.calls.pop(message["call"], None) if final else self.calls.get(message["call"])
            if stream is not None:
                stream.push(_InferenceResponse(self._tensors(message["outputs"], data), parameters=message.get("parameters")), final)
        elif kind == "call-end":
            stream = self.calls.pop(message["call"], None)
            if stream is not None:
                stream.push(_InferenceResponse(), True)
        elif kind == "call-failed":
            pending = self.calls.pop(message["call"], None)
            if pending is not None:
                error = pb_utils.TritonError._from_wire(message.get("message", ""), message.get("code"))
                response = _InferenceResponse(error=error)
                if isinstance(pending, _Stream):
                    pending.push(response, True)
                else:
                    pending.set_result(response)
        elif kind == "close":
            self._inbox.put((message, None))
        else:
            sys.stderr.write("stub: unknown message {!r} ignored\n".format(kind))

    @staticmethod
    def _tensors(slices, data):
        return [_Tensor._of(s["name"], s["datatype"], wire.read_array(data, s, False)) for s in slices]

    # -- main thread ------------------------------------------------------------------------

    def serve(self, model):
        """Runs executes until `close` (then finalize and exit)."""
        self.model = model
        self.serving = True
        inbox = self._inbox
        while True:
            message, states = inbox.get()
            try:
                if message["t"] == "execute":
                    self._execute(message, states)
                else:
                    self._close()
            except Exception:
                # The stub's own failure (the model's are answered as execute-failed): stop.
                traceback.print_exc()
                wire.exit_now(1)

    def _close(self):
        self.serving = False
        finalize = getattr(self.model, "finalize", None)
        if finalize is not None:
            try:
                finalize()
            except BaseException:
                traceback.print_exc()
        wire.exit_now(0)

    def _execute(self, message, states):
        started = perf_counter_ns()
        execute_id = message["id"]
        try:
            requests = self._requests(message, states)
        except Exception as error:
            self._failed(execute_id, states, error_text(error))
            return
        self.current_execute = execute_id
        inputs_done = perf_counter_ns()
        try:
            returned = self._run(requests)
            executed = perf_counter_ns()
            if self.decoupled:
                if returned is not None:
                    raise _Refusal(
                        "Python model '{}' is using the decoupled mode and the execute function must "
                        "return None.".format(self.model_name)
                    )
                responses = []
            else:
                responses = self._write_outputs(requests, states, returned)
            done = perf_counter_ns()
        except _Refusal as refusal:
            self._failed(execute_id, states, str(refusal), requests)
            return
        except BaseException as error:
            # BaseException too: a model's sys.exit() fails its batch, as in Triton.
            traceback.print_exc()
            self._failed(execute_id, states, error_text(error), requests)
            return
        finally:
            self.current_execute = None
            if not self.decoupled:
                pop = self.requests.pop
                for state in states:
                    state.executing = False
                    if not state.awaited:
                        pop(state.key, None)
        self.conn.send(
            {
                "t": "executed",
                "id": execute_id,
                "responses": responses,
                "outSize": self._out.size,
                "timings": {
                    "computeInputNs": inputs_done - started,
                    "computeInferNs": executed - inputs_done,
                    "computeOutputNs": done - executed,
                },
            }
        )
        if not self.decoupled:
            self._announced(states)

    def _failed(self, execute_id, states, text, requests=None):
        # As in Triton: the batch's requests all fail, and their senders close.
        with self._lock:
            for state in states:
                state.awaited = False
        if requests is not None and not self.decoupled and any(s.response is not None for s in states):
            self._failed_after_sends(execute_id, requests, states, text)
            return
        for state in states:
            state.closed = True
            state.executing = False
            self.requests.pop(state.key, None)
        self.conn.send({"t": "execute-failed", "id": execute_id, "message": text})

    def _failed_after_sends(self, execute_id, requests, states, text):
        """A non-decoupled execute failed after some of its requests' senders sent their response.
        Triton sends a sender's response at once and fails only the requests still open (its
        RespondErrorToAllRequests skips those answered; a non-decoupled request's later responses
        are dropped): those keep the response they were sent, the others get the error."""
        error = pb_utils.TritonError(failed_message(self.instance_name, text))
        returned = [None if s.response is not None else _InferenceResponse(error=error) for s in states]
        try:
            responses = self._write_outputs(requests, states, returned)
        except Exception as failure:
            self._failed(execute_id, states, text + "; " + error_text(failure))
            return
        for state in states:
            state.closed = True
            state.executing = False
            self.requests.pop(state.key, None)
        self.conn.send(
            {
                "t": "executed",
                "id": execute_id,
                "responses": responses,
                "outSize": self._out.size,
                "timings": {"computeInputNs": 0, "computeInferNs": 0, "computeOutputNs": 0},
            }
        )

    def _requests(self, message, states):
        size = message["inSize"]
        if size > self._in.size:
            self._in.remap(size)
        buffer = self._in.mm
        # A decoupled model may keep its requests past execute: their inputs leave the region.
        copy = self.decoupled
        read_array = wire.read_array
        make_tensor = _Tensor._of
        received = pb_utils.InferenceRequest._received
        requests = []
        for request, state in zip(message["requests"], states):
            inputs = [make_tensor(s["name"], s["datatype"], read_array(buffer, s, copy)) for s in request["inputs"]]
            requests.append(received(state, request, inputs, self.model_name, -1))
        return requests

    def _run(self, requests):
        execute = getattr(self.model, "execute", None)
        if execute is None:
            raise _Refusal("Python model {} does not implement `execute` method.".format(self.model_file))
        returned = execute(requests)
        if asyncio.iscoroutine(returned):
            future = asyncio.run_coroutine_threadsafe(returned, self._event_loop())
            if self.decoupled:
                # Triton does not wait for a decoupled model's async execute.
                self._background.add(future)
                future.add_done_callback(self._background_done)
                return None
            return future.result()
        return returned

    def _event_loop(self):
        """The instance's asyncio loop, running in its own thread (made on first use)."""
        if self._loop is None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            threading.Thread(target=loop.run_forever, name="stub-asyncio", daemon=True).start()
            self._loop = loop
        return self._loop

    def _background_done(self, future):
        self._background.discard(future)
        if future.cancelled():
            return
        error = future.exception()
        if error is not None:
            text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
            self.log("error", "async execute failed: " + text)

    def _write_outputs(self, requests, states, returned):
        """Lays every response's requested outputs into the output region; their wire entries."""
        if returned is None:
            # Every response went through the requests' senders (or none came).
            returned = [None] * len(requests)
        elif not isinstance(returned, list):
            raise _Refusal("Expected a list in the execute return, found type '{}'.".format(type(returned)))
        if len(returned) != len(requests):
            raise _Refusal(
                "Number of InferenceResponse objects do not match the number of InferenceRequest "
                "objects. InferenceRequest(s) size is:{}, and InferenceResponse(s) size is:{}".format(
                    len(requests), len(returned)
                )
            )
        entries = []
        payloads = []
        offset = 0
        for request, state, response in zip(requests, states, returned):
            if response is None:
                with self._lock:
                    response = state.response
                    awaited = response is None and not state.closed
                    awaited = awaited and request._release_flags != pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
                    # Its sender answers later, from whatever thread holds it (sent once `executed` went).
                    state.awaited = awaited
                if awaited:
                    entries.append({"pending": True})
                    continue
                if response is None:
                    entries.append({"error": self._missing_response(request)})
                    continue
            elif not isinstance(response, _InferenceResponse):
                raise _Refusal(
                    "Expected an 'InferenceResponse' object in the execute function return list, "
                    "found type '{}'.".format(type(response))
                )
            elif state.sent:
                raise _Refusal("Unable to send response. Non-decoupled model cannot send more than one response.")
            if response._error is not None:
                entries.append({"error": response._error._wire()})
                continue
            # Triton drops the outputs a request did not ask for.
            wanted = request._output_names
            tensors = [(t._name, t._datatype, t._host()) for t in response._tensors if t._name in wanted]
            slices, laid, offset = wire.layout(tensors, offset)
            payloads.extend(laid)
            entries.append(_outputs_entry(slices, response))
        self._reserve_output(offset)
        region = self._out.mm
        for start, payload, length in payloads:
            region[start : start + length] = payload
        return entries

    @staticmethod
    def _missing_response(request):
        if request._release_flags == pb_utils.TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
            return {"message": "Request rescheduling is not supported by this backend.", "code": "UNSUPPORTED"}
        return {"message": "The model's execute returned None for this request and sent no response for it.", "code": "INTERNAL"}

    def _reserve_output(self, size):
        region = self._out
        if size <= region.size:
            return
        steps = -(-(size - region.size) // self._growth)
        grown = region.size + steps * self._growth
        os.ftruncate(region.fd, grown)
        region.remap(grown)

    # -- responses of received requests ---------------------------------------------------

    def respond(self, state, response, final):
        """InferenceResponseSender.send(): decoupled, posts a `response`; otherwise records the
        response for the execute's answer (Triton's default-mode sender)."""
        if not self.decoupled:
            self._record(state, response, final)
            return
        cond = state.cond
        with cond:
            if state.closed:
                raise _TritonModelException("Unable to send response. Response sender has been closed.")
            if state.cancelled:
                if response is None:
                    # The final flag alone after the end: nobody to tell.
                    state.closed = True
                    return
                raise _TritonModelException(state.end_message)
            if final:
                state.closed = True
            else:
                while state.unacked >= MAX_UNSENT_RESPONSES and not state.cancelled:
                    cond.wait()
                if state.cancelled:
                    raise _TritonModelException(state.end_message)
                state.unacked += 1
        self._post_response(state, response, final)
        if final:
            self.requests.pop(state.key, None)

    def _post_response(self, state, response, final):
        """A `response` frame: the request's response (None: the final flag alone), its tensors inline."""
        header = {"t": "response", "key": state.key, "final": final}
        buffers = ()
        if response is not None:
            if response._error is not None:
                header["response"] = {"error": response._error._wire()}
            else:
                wanted = state.outputs
                tensors = [(t._name, t._datatype, t._host()) for t in response._tensors if t._name in wanted]
                slices, payloads, _ = wire.layout(tensors)
                header["response"] = _outputs_entry(slices, response)
                buffers = wire.frame_buffers(payloads)
        self.conn.send(header, buffers)

    def _record(self, state, response, final):
        with self._lock:
            if response is not None and state.sent > 0:
                raise _TritonModelException(
                    "Unable to send response. Non-decoupled model cannot send more than one response."
                )
            if response is None and final and state.sent == 0:
                raise _TritonModelException(
                    "Unable to send response. Non-decoupled model cannot send complete final before sending a response."
                )
            if state.closed:
                raise _TritonModelException("Unable to send response. Response sender has been closed.")
            if not state.executing and not state.awaited:
                raise _TritonModelException("Unable to send response. Response sender has been closed.")
            if response is not None:
                state.response = response
                state.sent += 1
            if final:
                state.closed = True
            if not state.announced or response is None:
                return
            state.awaited = False
            state.closed = True
            self.requests.pop(state.key, None)
        self._post_response(state, response, True)

    def _announced(self, states):
        """`executed` went: the awaited requests' responses go as their senders send them (or now, if sent meanwhile)."""
        ready = []
        with self._lock:
            for state in states:
                if not state.awaited:
                    continue
                state.announced = True
                if state.response is not None:
                    state.awaited = False
                    state.closed = True
                    self.requests.pop(state.key, None)
                    ready.append(state)
        for state in ready:
            self._post_response(state, state.response, True)

    # -- calls to other models (BLS) --------------------------------------------------------

    def _start(self, request, stream):
        """Sends a call; its pending side: a _Stream, or a Future of the InferenceResponse."""
        call = next(self._call_ids)
        header = {"t": "call", "call": call}
        if self.current_execute is not None:
            header["execute"] = self.current_execute
        header["model"] = request._model_name
        if request._model_version != -1:
            header["version"] = str(request._model_version)
        slices, payloads, _ = wire.layout([(t._name, t._datatype, t._host()) for t in request._inputs])
        header["inputs"] = slices
        if request._output_names:
            header["outputs"] = list(request._output_names)
        if request._parameters:
            header["parameters"] = request._parameters
        if request._correlation_id:
            header["correlationId"] = request._correlation_id
        if request._flags:
            header["flags"] = request._flags
        if request._timeout:
            header["timeoutUs"] = request._timeout
        if stream:
            header["stream"] = True
        pending = _Stream(self, call) if stream else concurrent.futures.Future()
        # Registered first: the answer may come before send() returns.
        self.calls[call] = pending
        try:
            self.conn.send(header, wire.frame_buffers(payloads))
        except BaseException:
            self.calls.pop(call, None)
            raise
        return pending

    def call(self, request, decoupled):
        pending = self._start(request, decoupled)
        if decoupled:
            iterator = ResponseIterator(pending)
            pending.first.result()
            return iterator
        return pending.result()

    def async_call(self, request, decoupled):
        loop = asyncio.get_running_loop()
        pending = self._start(request, decoupled)
        if decoupled:
            return loop.create_task(_after_first(pending, ResponseIterator(pending)))
        return asyncio.wrap_future(pending, loop=loop)

    # -- logs and metrics ---------------------------------------------------------------------

    def log(self, level, message, filename=None, line=None):
        header = {"t": "log", "level": level, "message": message}
        if filename is not None:
            header["file"] = filename
            header["line"] = line
        self.conn.send(header)

    def post(self, message):
        self.conn.send(message)


def failed_message(instance_name, text):
    """Triton's words for a batch whose execute() raised (pb_stub.cc); python-instance.ts writes the same."""
    return "Failed to process the request(s) for model '{}', message: {}".format(instance_name, text)


def _outputs_entry(slices, response):
    """A response's entry on the wire: its output slices, and its parameters when it has any."""
    if response._parameters:
        return {"outputs": slices, "parameters": response._parameters}
    return {"outputs": slices}
