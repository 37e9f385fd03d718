# Triton's simple_identity example: every request's INPUT0 (strings, any length) back as OUTPUT0.
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            strings = pb_utils.get_input_tensor_by_name(request, "INPUT0")
            responses.append(pb_utils.InferenceResponse([pb_utils.Tensor("OUTPUT0", strings.as_numpy())]))
        return responses
