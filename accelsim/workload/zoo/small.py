"""Small models for tests, edge devices and quick sweeps.

- `mlp`: a multilayer perceptron on a flattened image, by default 784-512-512-10 on 28x28
  MNIST digits (the classic fully connected MNIST baseline, e.g. the Keras / PyTorch MNIST
  MLP examples; LeCun et al. 1998 for the data set). 669,706 params.
- `lstm`: the "medium" word-level LSTM language model of Zaremba, Sutskever & Vinyals 2014,
  "Recurrent Neural Network Regularization", arXiv:1409.2329 (Penn Treebank, vocabulary
  10,000, 650 units, 2 layers, unrolled 35 steps, untied input and output embeddings).
  19,780,400 params with PyTorch's two LSTM bias vectors (19,775,200 with one).
"""

from __future__ import annotations

from accelsim.workload.graph import Graph, GraphBuilder
from accelsim.workload.zoo import model


@model("mlp")
def mlp(image_size: int = 28, in_channels: int = 1, hidden: int = 512, layers: int = 2,
        classes: int = 10) -> Graph:
    """`layers` hidden layers of `hidden` units with ReLU, on a flattened image."""
    g = GraphBuilder("mlp", family="small")
    x = g.input("image", (in_channels, image_size, image_size))
    x = g.reshape(x, shape=(-1,), name="flatten")
    for i in range(layers):
        with g.scope(f"fc{i + 1}"):
            x = g.relu(g.linear(x, out_features=hidden, name="linear"), name="relu")
    g.linear(x, out_features=classes, name=f"fc{layers + 1}")
    return g.build()


@model("gemm")
def gemm(m: int = 512, n: int = 768, k: int = 768) -> Graph:
    """One matrix product per sample, (M x K) @ (K x N): a linear layer without bias on an
    M x K input, its K x N weights the parameters; 2 M N K FLOPs (a batch of B: B such
    products sharing the weights)."""
    g = GraphBuilder("gemm", family="small")
    g.linear(g.input("a", (m, k)), out_features=n, bias=False, name="matmul")
    return g.build()


@model("lstm")
def lstm(seq_len: int = 35, vocab_size: int = 10000, hidden_size: int = 650,
         layers: int = 2) -> Graph:
    """Embedding -> `layers` LSTM layers -> linear decoder to vocabulary logits."""
    g = GraphBuilder("lstm", family="small")
    x = g.input("tokens", (seq_len,), dtype="index")
    x = g.embedding(x, num_embeddings=vocab_size, embedding_dim=hidden_size, name="encoder")
    # NB: dropout (p = 0.5) between layers is left out (an identity at inference).
    for i in range(layers):
        x = g.lstm(x, hidden_size=hidden_size, name=f"rnn.{i}")
    g.linear(x, out_features=vocab_size, name="decoder")
    return g.build()
