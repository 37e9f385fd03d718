"""Triton's own Python gRPC client, unchanged (tritonclient.grpc), streaming the decoupled model
repeat_int32 as Triton's qa/L0_decoupled/decoupled_test.py does: requests with ids, the responses
of each (OUT, IDX) and its triton_final_response flags, with and without empty final responses.
Prints one JSON object: for each request id, its responses as [OUT, IDX, final] (an empty final
response as [null, null, true]). Usage: stream_repeat.py HOST:PORT [MODEL], MODEL repeat_int32 or an
ensemble around it with the same tensors (L0_decoupled's simple_repeat, sequence_repeat)."""
import json
import queue
import sys

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

url = sys.argv[1]
model = sys.argv[2] if len(sys.argv) > 2 else "repeat_int32"
answers = queue.Queue()


def callback(result, error):
    answers.put(error if error else result)


def request(client, request_id, repeat, empty_final):
    inputs = [
        grpcclient.InferInput("IN", [repeat], "INT32"),
        grpcclient.InferInput("DELAY", [repeat], "UINT32"),
        grpcclient.InferInput("WAIT", [1], "UINT32"),
    ]
    inputs[0].set_data_from_numpy(np.arange(100, 100 + repeat, dtype=np.int32))
    inputs[1].set_data_from_numpy(np.full([repeat], 10, dtype=np.uint32))
    inputs[2].set_data_from_numpy(np.array([0], dtype=np.uint32))
    outputs = [grpcclient.InferRequestedOutput("OUT"), grpcclient.InferRequestedOutput("IDX")]
    client.async_stream_infer(
        model_name=model,
        inputs=inputs,
        request_id=request_id,
        outputs=outputs,
        enable_empty_final_response=empty_final,
    )


results = {}
with grpcclient.InferenceServerClient(url=url) as client:
    client.start_stream(callback=callback)
    # With empty final responses every request ends with a final flag the client sees.
    for request_id, repeat in [("none", 0), ("one", 1), ("many", 5)]:
        request(client, request_id, repeat, True)
    finals = 0
    while finals < 3:
        item = answers.get(timeout=30)
        if isinstance(item, InferenceServerException):
            raise item
        response = item.get_response()
        final = response.parameters["triton_final_response"].bool_param
        finals += 1 if final else 0
        if response.outputs:
            results.setdefault(response.id, []).append([int(item.as_numpy("OUT")[0]), int(item.as_numpy("IDX")[0]), final])
        else:
            results.setdefault(response.id, []).append([None, None, final])
    # Without them, the client counts the responses it expects (Triton's _stream_infer).
    request(client, "plain", 3, False)
    for _ in range(3):
        item = answers.get(timeout=30)
        if isinstance(item, InferenceServerException):
            raise item
        response = item.get_response()
        final = response.parameters["triton_final_response"].bool_param
        results.setdefault(response.id, []).append([int(item.as_numpy("OUT")[0]), int(item.as_numpy("IDX")[0]), final])
    try:
        extra = answers.get(timeout=0.3)
        raise AssertionError(f"a response came after the last one expected: {extra}")
    except queue.Empty:
        pass
    client.stop_stream()

print(json.dumps(results, sort_keys=True))
