"""A tiny MLP on ``microtape.Scalar``, mirroring micrograd's ``nn.MLP``.

The same shape of code as ``micrograd/nn.py`` (version 0.1.0), so the two
engines do the same scalar operations: a neuron is ``relu(Σ wᵢ xᵢ + b)``
(the last layer linear), weights uniform in ``[-1, 1]``, bias 0.
"""

import random

import microtape as mt


class Neuron:
    def __init__(self, nin, nonlin=True):
        self.w = [mt.Scalar(random.uniform(-1, 1)) for _ in range(nin)]
        self.b = mt.Scalar(0.0)
        self.nonlin = nonlin

    def __call__(self, x):
        act = sum((wi * xi for wi, xi in zip(self.w, x, strict=True)), self.b)
        return act.relu() if self.nonlin else act

    def parameters(self):
        return self.w + [self.b]


class Layer:
    def __init__(self, nin, nout, **kwargs):
        self.neurons = [Neuron(nin, **kwargs) for _ in range(nout)]

    def __call__(self, x):
        out = [n(x) for n in self.neurons]
        return out[0] if len(out) == 1 else out

    def parameters(self):
        return [p for n in self.neurons for p in n.parameters()]


class MLP:
    def __init__(self, nin, nouts):
        sizes = [nin] + nouts
        self.layers = [Layer(sizes[i], sizes[i + 1], nonlin=i != len(nouts) - 1) for i in range(len(nouts))]

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        return x

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]

    def zero_grad(self):
        for p in self.parameters():
            p.grad = None
