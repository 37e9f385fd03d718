"""
The text_classification_py pipeline's last step, Triton's Python backend form of the JavaScript
`postprocess` (examples/src/postprocess), written by hand with numpy and the standard library
only: logits FP32 [n, classes] -> the top-k labels BYTES [n, k] and their softmax scores FP32
[n, k]. Labels come from the file named by the `labels_file` parameter (default labels.txt) in
the model folder, k from `top_k` (default 1). The softmax rounds as the JavaScript one does (each
exponential to float32, their sum in float64, each quotient to float32), so both give the same
scores bit for bit, as test/example-pipelines.test.ts checks through both ensembles.
"""
import json
import math
import os

import numpy as np
import triton_python_backend_utils as pb_utils


def parse_labels(text):
    """labels.txt: one label per line, blank lines at the end ignored."""
    labels = [line[:-1] if line.endswith("\r") else line for line in text.split("\n")]
    while labels and labels[-1] == "":
        labels.pop()
    return labels


def softmax(logits):
    """Softmax of one row, computed stably (the largest logit subtracted first)."""
    values = [float(x) for x in logits]
    largest = -math.inf
    for x in values:
        largest = math.nan if math.isnan(x) or math.isnan(largest) else max(largest, x)
    exps = [float(np.float32(math.exp(x - largest))) for x in values]
    total = 0.0
    for e in exps:
        total += e
    return np.array([e / total for e in exps], dtype=np.float32)


def top_k(scores, k):
    """The k highest scores' indices, highest first; ties (and NaN rows) keep the lower index first."""
    order = sorted(range(len(scores)), key=lambda i: (0.0 if math.isnan(scores[i]) else -float(scores[i]), i))
    return order[:k]


def string_parameter(config, name):
    return config.get("parameters", {}).get(name, {}).get("string_value")


def positive_integer_parameter(config, name, fallback):
    text = string_parameter(config, name)
    if text is None:
        return fallback
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value.is_integer() or value < 1:
        raise pb_utils.TritonModelException("parameter " + name + " must be a positive integer, got '" + text + "'")
    return int(value)


class TritonPythonModel:
    def initialize(self, args):
        config = json.loads(args["model_config"])
        name = string_parameter(config, "labels_file") or "labels.txt"
        with open(os.path.join(args["model_repository"], name), encoding="utf-8", errors="replace", newline="") as f:
            self.labels = parse_labels(f.read())
        if not self.labels:
            raise pb_utils.TritonModelException(name + " has no labels")
        self.encoded = [label.encode("utf-8") for label in self.labels]
        self.k = min(positive_integer_parameter(config, "top_k", 1), len(self.labels))

    def execute(self, requests):
        return [self.rank(request) for request in requests]

    def rank(self, request):
        logits = pb_utils.get_input_tensor_by_name(request, "logits").as_numpy()
        if logits.ndim != 2 or logits.shape[1] != len(self.labels):
            return pb_utils.InferenceResponse(
                error=pb_utils.TritonError(
                    "logits must have shape [n, %d] (one per label), got [%s]"
                    % (len(self.labels), ", ".join(str(d) for d in logits.shape)),
                    pb_utils.TritonError.INVALID_ARG,
                )
            )
        rows = logits.shape[0]
        labels = np.empty((rows, self.k), dtype=np.object_)
        scores = np.empty((rows, self.k), dtype=np.float32)
        for row in range(rows):
            probabilities = softmax(logits[row])
            for i, index in enumerate(top_k(probabilities, self.k)):
                labels[row, i] = self.encoded[index]
                scores[row, i] = probabilities[index]
        return pb_utils.InferenceResponse([pb_utils.Tensor("labels", labels), pb_utils.Tensor("scores", scores)])
