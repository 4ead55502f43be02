"""The model abstraction optimize(input_data) trains, shaped after AiDotNet's models: it exposes its
parameters and computes the loss (and gradient) for a batch. Pass it to the base optimizer
(AdamOptimizer(model, options)), as in AiDotNet."""
import numpy as np

from ._views import as_native_array
from .sharding import ParameterLayout

__all__ = ["Model"]


class Model:
    """Subclass it and implement loss_and_gradient (and loss, when a cheaper loss-only pass exists;
    predict, to have predictions in the result).

    tensors: [(name, count), ...] in packing order (count may be a (rows, cols) shape: a matrix, which
    PowerSGD compression can approximate); dtype: numpy.float64 (AiDotNet's double) or numpy.float32, the
    element type of the sharded optimizer's parameters; initial: the packed initial parameters (zeros
    when omitted)."""

    def __init__(self, tensors, dtype=np.float64, initial=None):
        self.dtype = np.dtype(dtype)
        self._layout = ParameterLayout(self.dtype)
        for name, count in tensors:
            self._layout.add(name, count)
        n = self._layout.element_count
        self._parameters = (np.zeros(n, self.dtype) if initial is None
                            else as_native_array(initial, self.dtype, "initial", n).copy())

    def parameter_layout(self):
        """The tensors (ParameterLayout) a sharded optimizer is created with."""
        return self._layout

    @property
    def parameter_count(self):
        return self._layout.element_count

    def get_parameters(self):
        """A copy of the packed parameters."""
        return self._parameters.copy()

    def set_parameters(self, parameters):
        """Sets the packed parameters (optimize() sets the best solution at its end)."""
        self._parameters = as_native_array(parameters, self.dtype, "parameters", self.parameter_count).copy()

    def loss_and_gradient(self, parameters, gradient, x, y):
        """The mean loss over the batch (x, y) at `parameters`; the mean gradient into `gradient` (zeroed on
        entry, the parameters' dtype and length)."""
        raise NotImplementedError(f"{type(self).__name__} must implement loss_and_gradient(parameters, gradient, x, y)")

    def loss(self, parameters, x, y):
        """The mean loss over (x, y) at `parameters` (validation, test and final scores)."""
        return self.loss_and_gradient(parameters, np.zeros(self.parameter_count, self.dtype), x, y)
