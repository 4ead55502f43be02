"""The model optimize(input_data) trains, shaped after AiDotNet's models: its parameters, and the loss (and
gradient) of a batch. Pass it to the base optimizer (AdamOptimizer(model, options)), as in AiDotNet."""
import numpy as np

from ._views import as_native_array
from .sharding import ParameterLayout


class Model:
    """Subclass it and implement loss_and_gradient (and loss, for a cheaper loss-only pass; predict(x, parameters),
    for predictions in the result). tensors: [(name, count or (rows, cols)), ...] in packing order; dtype:
    numpy.float64 (AiDotNet's double) or numpy.float32, the sharded optimizer's element type; initial: the packed
    initial parameters (zeros when omitted)."""

    def __init__(self, tensors, dtype=np.float64, initial=None):
        self.dtype, self._layout = np.dtype(dtype), ParameterLayout(dtype)
        for name, count in tensors:
            self._layout.add(name, count)
        n = self._layout.element_count
        self._parameters = np.zeros(n, self.dtype) if initial is None else as_native_array(initial, dtype, "initial", n).copy()

    def parameter_layout(self):
        return self._layout

    parameter_count = property(lambda self: self._layout.element_count)

    def get_parameters(self):
        return self._parameters.copy()

    def set_parameters(self, parameters):
        """Sets the packed parameters (optimize() sets the best solution at its end)."""
        self._parameters = as_native_array(parameters, self.dtype, "parameters", self.parameter_count).copy()

    def loss_and_gradient(self, parameters, gradient, x, y):
        """The mean loss over the batch (x, y) at `parameters`; the mean gradient into `gradient` (zeroed)."""
        raise NotImplementedError(f"{type(self).__name__} must implement loss_and_gradient(parameters, gradient, x, y)")

    def loss(self, parameters, x, y):
        """The mean loss over (x, y) at `parameters` (validation, test and final scores)."""
        return self.loss_and_gradient(parameters, np.zeros(self.parameter_count, self.dtype), x, y)
